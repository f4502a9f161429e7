"""Random client participation (Hasircioglu and Gunduz 2022): Theorem 4.1, OLS, WCS, CS and a
proven tighter bound.

Source: Hasircioglu & Gunduz, "Privacy Amplification via Random Participation in Federated
Learning" (arXiv 2205.01556), with privfl's corrections. numpy/scipy/dp-accounting only; never
imports torch. The user documentation, with the proofs and the corrections ("Where privfl
departs from the paper, and why"), is ``docs/accountants/random-participation.md``.

What ran (Algorithm 1)
----------------------
Every iteration each available client joins independently with probability ``p``
(``client_rate``); a participating client keeps each of its records independently with probability
``q`` (``record_rate``) and sends the sum of the kept records' gradients, each clipped to L2 norm
``C`` (``clip_norm``). The trusted server adds one ``N(0, sigma^2 I)`` (``noise`` = sigma, the std
on the *sum*) and releases the noisy sum (rescaling by the *expected* batch is post-processing).
Neighbouring datasets differ by adding/removing one record x' held by a client that holds
``records`` = d other records (the largest d over clients is the worst case: every bound below
except Theorem 4.1 is non-decreasing in d). Only ``z = sigma / C`` matters.

Directions
----------
``forward`` is ``H_{e^eps}(M(D u {x'}) || M(D))`` (the only one the paper bounds), ``reverse`` is
``H_{e^eps}(M(D) || M(D u {x'}))``. Rigorous answers (``kind = "bound"``) take the maximum of
both, each computed in closed form (privfl's addition: the paper bounds only the forward one).

Kinds: ``bound`` (rigorous for random participation: ``per-s1-convexity``, ``wcs``, ``ols`` and
their compositions), ``estimate`` (``theorem-4.1``, the paper's formula, which can fall below the
truth) and ``reference`` (``cs``, ``cs-rdp``, ``cs-pld``: rigorous for a different mechanism,
centralised Poisson sampling at rate p q, and therefore a LOWER reference for random
participation; never a guarantee for Algorithm 1). :func:`scheme_kind` gives the kind of a scheme.

Schemes (per iteration)
-----------------------
With ``eps' = log(1 + (e^eps - 1)/(p q))``, ``alpha' = e^eps'``, ``beta = e^(eps - eps')``,
``c1 = (1-p)/(1-pq)``, ``c2 = p(1-q)/(1-pq)``, ``cb1 = (1-beta) c1``, ``cb2 = (1-beta) c2 + beta``,
``k = alpha' cb2 = 1 + (e^eps - 1)/q``, ``c = alpha' cb1``, ``kappa = 1 - (e^eps - 1)(1-q)/q``
and ``b_i`` the Binomial(d, q) pmf; ``phi_m`` is the N(m C, sigma^2) density:

* ``cs``  - Poisson sampling at rate ``p q``: ``delta = pq delta_G(eps')`` (forward).
  A bound for *that* scheme; for random participation it is the exact delta of the
  zero-gradient configuration, i.e. a LOWER bound (the ideal that random participation cannot
  beat).
* ``ols`` - Poisson at rate q: ``delta = q delta_G(log k)``. Upper bound for random
  participation (and exact for p = 1).
* ``wcs`` - participation revealed: ``delta = p * delta_ols`` in each direction. Upper bound
  for random participation (post-processing: drop the revealed bit); exact for the
  "untrusted-participants-only" server.
* ``per-s1-convexity`` (privfl's bound, not in the paper; proof in the user documentation) -
  ``delta = pq sum_i b_i int [phi_{i+1} - k phi_i - c phi_0]_+`` (forward) and
  ``pq sum_i b_i int [kappa phi_i - c phi_0 - e^eps phi_{i-1}]_+`` (reverse). PROVEN upper bound
  (advanced joint convexity, joint convexity over client 1's own sampling, and a Gaussian
  interpolation lemma showing that aligned, maximal gradients are the worst case of each term;
  anti-aligned for the reverse direction). CS <= it <= WCS <= OLS.
* ``theorem-4.1`` - the paper's Eq. (6): the *exact* forward delta of one configuration (all of
  client 1's gradients aligned with norm C). Always ``kind = "estimate"``: a lower bound on the
  true delta of that configuration, not a worst-case bound; it can fall below CS.

Numerics: every per-term integral ``int [P phi(t) - sum_j N_j phi(t + h_j)]_+ dt`` (all negative
means below the positive one) has exactly one crossing t* (Descartes' rule of signs for
exponential sums), found by Newton's method from a closed-form lower bracket (the log-ratio is
convex and decreasing, so Newton converges monotonically), then evaluated as
``P phi(t*) sum_j w_j (M(t*) - M(t* + h_j))`` with the Mills ratio ``M = SF/phi`` (no
cancellation of tail masses). Theorem 4.1 solves its z* (Eq. 7, a single sign change, proven the
same way) by a bracketed Brent root with a grid-scan fallback and evaluates Eq. (6) with the
same Mills form. Everything is in log space, so deltas far below 1e-300 are still ordered.

Composition over T iterations (rigorous, both directions): ``cs`` and ``ols`` are standard
Poisson-subsampled Gaussian events handed to privfl's RDP and PLD accountants; ``wcs`` uses the
exact closed-form RDP ``log(1 - p + p e^{(a-1) RDP_ols(a)})/(a-1)`` and the exact PLD mixture
``(1-p) * (loss 0) + p * PLD_ols`` (dp-accounting, pessimistic connect-the-dots). For
``theorem-4.1`` and ``per-s1-convexity`` only basic composition ``(T eps, T delta)`` of the
per-iteration numbers is offered.

Modules (one job each)
----------------------
* :mod:`.setting` - the schemes, servers and accountants; a checked setting ``(p, q, d, z)``.
* :mod:`.labels` - what is released, what each scheme's number means, notes and sampling labels.
* :mod:`.amplification` - the amplification maps and the paper's constants at an epsilon.
* :mod:`.gaussian` - the one-crossing Gaussian integrals in log space; the Gaussian delta.
* :mod:`.deltas` - per-iteration log deltas of cs, ols, wcs and per-s1-convexity.
* :mod:`.theorem41` - the paper's Theorem 4.1 (Eq. 6 and 7), an estimate.
* :mod:`.per_iteration` - any scheme's delta in any direction; the public per-iteration queries.
* :mod:`.calibration` - the noise per scheme for a per-iteration target, and its labelled rows.
* :mod:`.composition` - rigorous composition over T iterations (events, WCS RDP and PLD).
* :mod:`.report` - the labelled report of every scheme, per iteration and composed.
* :mod:`.accountant` - the registered ``participation`` accountant of a
  :class:`~privfl.accounting.events.RandomParticipationStep` (through :mod:`.report`).
"""

from __future__ import annotations

from privfl.accounting.participation.amplification import (
    amplify_epsilon,
    deamplify_epsilon,
    participation_constants,
)
from privfl.accounting.participation.calibration import (
    NoiseCalibration,
    calibrate_participation,
    calibrate_participation_report,
    participation_noise,
)
from privfl.accounting.participation.composition import participation_event, wcs_pld, wcs_rdp
from privfl.accounting.participation.gaussian import gaussian_delta
from privfl.accounting.participation.per_iteration import (
    participation_delta,
    participation_epsilon,
    theorem41_zstar,
)
from privfl.accounting.participation.report import participation_report
from privfl.accounting.participation.setting import (
    ACCOUNTANTS,
    COMPOSABLE_SCHEMES,
    DIRECTIONS,
    SCHEMES,
    SERVERS,
    scheme_kind,
)

__all__ = [
    "ACCOUNTANTS",
    "COMPOSABLE_SCHEMES",
    "DIRECTIONS",
    "SCHEMES",
    "SERVERS",
    "amplify_epsilon",
    "calibrate_participation",
    "calibrate_participation_report",
    "NoiseCalibration",
    "deamplify_epsilon",
    "gaussian_delta",
    "participation_constants",
    "participation_delta",
    "participation_epsilon",
    "participation_event",
    "participation_noise",
    "participation_report",
    "scheme_kind",
    "theorem41_zstar",
    "wcs_pld",
    "wcs_rdp",
]
