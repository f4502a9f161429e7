"""Per-round accounting with the state kept between rounds equals accounting from scratch,
to the last bit (hypothesis properties).

What a run keeps between rounds: each step's RDP curve (``rdp_accountant._step_curve``; a round's
composition is ``count x curve``, the same floats as from scratch), each scheme's per-iteration
result under random participation (``participation.report._per_iteration_cached``), and each
plan's results per round. A run asks for round 1, 2, ..., T in turn with warm caches; here every
answer is compared with the one computed after clearing the caches.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import RandomParticipationStep, dpsgd_event
from privfl.accounting.participation import report
from privfl.accounting.rdp import accountant as rdp_accountant


@settings(max_examples=25, deadline=None)
@given(z=st.floats(0.5, 5.0), q=st.floats(1e-3, 1.0), rounds=st.integers(1, 6),
       per_round=st.integers(1, 50), sampling=st.sampled_from(["poisson", "none"]))
def test_rdp_round_by_round_equals_from_scratch(z, q, rounds, per_round, sampling):
    q = 1.0 if sampling == "none" else q
    warm = []
    for r in range(1, rounds + 1):
        warm.append(evaluate(dpsgd_event(z, q, r * per_round, sampling=sampling), 1e-5,
                             methods="rdp"))
    for r, results in enumerate(warm, 1):
        rdp_accountant._step_curve.cache_clear()
        cold = evaluate(dpsgd_event(z, q, r * per_round, sampling=sampling), 1e-5,
                        methods="rdp")
        assert [x.to_dict() for x in results] == [x.to_dict() for x in cold]
    assert [x[0].steps for x in warm] == [r * per_round for r in range(1, rounds + 1)]
    epsilons = [x[0].epsilon for x in warm]
    assert epsilons == sorted(epsilons)  # one more round never lowers epsilon


@settings(max_examples=8, deadline=None)
@given(p=st.floats(0.1, 1.0), q=st.floats(0.01, 0.5), noise=st.floats(0.8, 3.0),
       rounds=st.integers(2, 4))
def test_random_participation_round_by_round_equals_from_scratch(p, q, noise, rounds):
    def node(r: int) -> RandomParticipationStep:
        return RandomParticipationStep(p, q, 50, noise, iterations=r,
                                       schemes=("wcs", "cs"), composition=("rdp",))

    warm = [evaluate(node(r), 1e-5) for r in range(1, rounds + 1)]
    for r, results in enumerate(warm, 1):
        report._per_iteration_cached.cache_clear()
        rdp_accountant._step_curve.cache_clear()
        assert [x.to_dict() for x in results] == [x.to_dict() for x in evaluate(node(r), 1e-5)]
    composed = [[x.epsilon for x in results if x.steps > 1] for results in warm[1:]]
    assert all(x <= y for a, b in zip(composed[:-1], composed[1:], strict=True)
               for x, y in zip(a, b, strict=True))
