"""privfl's accountants behind Flower's ``PrivacyAccountant`` interface (Flower 1.42,
``flwr.serverapp.PrivacyAccountant``), for teams that keep Flower's own DP wrappers
(``DifferentialPrivacyServerSideFixedClipping`` and friends).

Flower's wrapper composes one ``GaussianPrivacyEvent(noise_multiplier z, sample_size m,
population_size N)`` per released aggregate. :class:`PrivflAccountant` turns each into a
client-level privfl :class:`~privfl.accounting.events.NoisyStep` and answers with privfl's
accountants (:func:`privfl.accounting.methods.account`):

* **Amplification only for secret Poisson sampling.** With ``sampling_method = POISSON`` AND
  ``secret_sampling=True`` (the cohort is drawn by independent coin flips at rate q = m / N that
  nobody who sees the released models learns: e.g. privfl's ServerApp with ``privacy.secure``)
  a round is the Poisson-subsampled Gaussian at q. Otherwise - Flower's own node sampling
  (``random.sample``: fixed size, Python's Mersenne Twister, visible to the server), or
  ``NO_AMPLIFICATION`` - a round is the plain Gaussian mechanism on the sum (q = 1): no
  amplification is claimed, and the label says so.
* **Methods.** Default: without amplification, exact Gaussian DP (``gdp-clt``, which is exact -
  a bound - when nothing is subsampled; Dong, Roth and Su 2022) and RDP; with it, the
  pessimistic PLD and RDP (Mironov, Talwar and Zhang 2019). The headline epsilon
  (:meth:`get_epsilon`, ``get_privacy_spent``) is the smallest *bound*; every method's labelled
  result is in :meth:`results`.
* **Labels.** ``PrivacySpent.accounting_method`` carries the headline's labels: method, bound,
  client level, neighbouring relation, sampling, release and delta.

On the issue's example (N = 1,000 clients, 200 rounds, z = 1, delta = 1e-5): without sampling
privfl gives 159.44 (exact GDP) where Flower's RDP accountant gives 166.04; with secret Poisson
sampling at q = 0.1, 9.97 (PLD) where Flower's RDP (if it were allowed) gives 11.06 (tested).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from privfl._validation import check_delta, check_epsilon, check_int
from privfl.accounting.events import Neighbouring, NoisyStep, PrivacyEvent, Sampling, Unit
from privfl.accounting.methods import AccountingOptions, account, resolve_methods
from privfl.accounting.results import PrivacyResult

__all__ = ["PrivflAccountant"]

_RELEASE = "every aggregate (global model) of every round"
_STATE_VERSION = 1


class PrivflAccountant:
    """A Flower ``PrivacyAccountant`` backed by privfl's accountants (module docstring).

    Parameters
    ----------
    config
        Flower's ``PrivacyConfig`` (target delta, population N, neighbouring relation,
        sampling method, optional max epsilon).
    secret_sampling
        True only if the cohorts are Poisson samples kept secret from whoever sees the
        releases; needed (with ``sampling_method = POISSON``) for amplification.
    methods
        privfl method names (``rdp``, ``pld``, ``gdp-clt``); default as in the module
        docstring.
    options
        :class:`~privfl.accounting.methods.AccountingOptions` (RDP orders, PLD grid).
    """

    def __init__(self, config: Any, *, secret_sampling: bool = False,
                 methods: str | Sequence[str] | None = None,
                 options: AccountingOptions | None = None) -> None:
        from flwr.serverapp import PrivacyConfig, SamplingMethod

        if not isinstance(config, PrivacyConfig):
            raise ValueError(f"config = {type(config).__name__} is not allowed: must be a "
                             "flwr.serverapp.PrivacyConfig")
        self._config = config
        self.secret_sampling = bool(secret_sampling)
        self.amplified = (config.sampling_method is SamplingMethod.POISSON
                          and self.secret_sampling)
        default = ("pld", "rdp") if self.amplified else ("gdp-clt", "rdp")
        self.methods = resolve_methods(default if methods is None else methods)
        self.options = options
        self._compositions: list[tuple[Any, int]] = []
        self._cache: dict[tuple, list[PrivacyResult]] = {}

    @classmethod
    def for_wrapper(cls, strategy: Any, *, population_size: int, target_delta: float,
                    max_epsilon: float | None = None, **kwargs: Any) -> PrivflAccountant:
        """An accountant for a Flower DP wrapper (``strategy``): reads its noise multiplier,
        clipping norm and number of sampled clients, and configures Flower's only accounted
        setting for fixed clipping (``NO_AMPLIFICATION``, add/remove one client). Pass it to
        the wrapper's ``accountant=`` argument (or use it alone, composing
        :meth:`event` per release)."""
        from flwr.serverapp import NeighboringRelation, PrivacyConfig, SamplingMethod

        for name in ("noise_multiplier", "clipping_norm", "num_sampled_clients"):
            if not hasattr(strategy, name):
                raise ValueError(f"strategy = {type(strategy).__name__} has no {name}: must be "
                                 "one of Flower's DP wrappers")
        config = PrivacyConfig(
            target_delta=check_delta("target_delta", target_delta),
            population_size=check_int("population_size", population_size, 1),
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
            sampling_method=SamplingMethod.NO_AMPLIFICATION, max_epsilon=max_epsilon)
        accountant = cls(config, **kwargs)
        accountant.wrapper = {name: getattr(strategy, name) for name in
                              ("noise_multiplier", "clipping_norm", "num_sampled_clients")}
        return accountant

    def event(self) -> Any:
        """The ``GaussianPrivacyEvent`` of one release of the wrapper read by
        :meth:`for_wrapper`."""
        from flwr.serverapp import GaussianPrivacyEvent

        wrapper = getattr(self, "wrapper", None)
        if wrapper is None:
            raise ValueError("event() needs an accountant made by PrivflAccountant.for_wrapper")
        return GaussianPrivacyEvent(noise_multiplier=float(wrapper["noise_multiplier"]),
                                    sample_size=int(wrapper["num_sampled_clients"]),
                                    population_size=self._config.population_size)

    # ------------------------------------------------------------------ Flower's protocol
    @property
    def config(self) -> Any:
        return self._config

    @property
    def num_releases(self) -> int:
        return sum(count for _, count in self._compositions)

    def compose(self, event: Any, count: int = 1) -> None:
        """Compose ``count`` identical releases ``event`` (a ``GaussianPrivacyEvent``)."""
        self._check_event(event)
        self._compositions.append((event, check_int("count", count, 1)))

    def get_epsilon(self, delta: float) -> float:
        return self.headline(delta=check_delta("delta", delta)).epsilon

    def get_delta(self, epsilon: float) -> float:
        return self.headline(epsilon=check_epsilon("epsilon", epsilon)).delta

    def get_privacy_spent(self, delta: float | None = None) -> Any:
        """Flower's ``PrivacySpent``: the headline epsilon, its labels in
        ``accounting_method``."""
        from flwr.serverapp import PrivacySpent

        delta = self._config.target_delta if delta is None else check_delta("delta", delta)
        best = self.headline(delta=delta)
        return PrivacySpent(epsilon=best.epsilon, delta=delta, num_releases=self.num_releases,
                            accounting_method=self.label(best),
                            optimal_order=best.extras.get("order"))

    def would_exceed(self, event: Any, max_epsilon: float | None = None,
                     count: int = 1) -> bool:
        """Whether composing ``count`` more ``event`` would exceed ``max_epsilon`` (default:
        the config's) at the target delta; nothing is composed."""
        self._check_event(event)
        limit = self._config.max_epsilon if max_epsilon is None else max_epsilon
        if limit is None:
            raise ValueError("max_epsilon = None: give it here or in PrivacyConfig")
        limit = check_epsilon("max_epsilon", limit)
        planned = [*self._compositions, (event, check_int("count", count, 1))]
        best = _smallest_bound(self._results(planned, delta=self._config.target_delta))
        return best.epsilon > limit

    def state_dict(self) -> dict[str, object]:
        return {"schema_version": _STATE_VERSION, "backend": "privfl",
                "secret_sampling": self.secret_sampling, "methods": list(self.methods),
                "compositions": [{"noise_multiplier": e.noise_multiplier,
                                  "sample_size": e.sample_size,
                                  "population_size": e.population_size, "count": c}
                                 for e, c in self._compositions]}

    def load_state_dict(self, state: dict[str, object]) -> None:
        from flwr.serverapp import GaussianPrivacyEvent

        if not isinstance(state, dict) or state.get("schema_version") != _STATE_VERSION \
                or state.get("backend") != "privfl":
            raise ValueError("state is not a PrivflAccountant state_dict (schema_version "
                             f"{_STATE_VERSION}, backend privfl)")
        if (bool(state["secret_sampling"]) != self.secret_sampling
                or tuple(state["methods"]) != self.methods):
            raise ValueError("state was written with other secret_sampling or methods")
        compositions = []
        for entry in state["compositions"]:
            event = GaussianPrivacyEvent(float(entry["noise_multiplier"]),
                                         int(entry["sample_size"]),
                                         int(entry["population_size"]))
            self._check_event(event)
            compositions.append((event, check_int("count", entry["count"], 1)))
        self._compositions = compositions

    # ------------------------------------------------------------------ privfl's view
    def privacy_event(self, compositions: list | None = None) -> PrivacyEvent:
        """The client-level privfl event of the composed releases."""
        compositions = self._compositions if compositions is None else compositions
        if not compositions:
            raise ValueError("no release was composed: nothing to account")
        relation = (Neighbouring.ADD_REMOVE if self._config.neighboring_relation.value
                    == "add-or-remove-one" else Neighbouring.REPLACE_ONE)
        steps = [(self._step(event), count) for event, count in compositions]
        return PrivacyEvent(tuple(steps), neighbouring=relation, unit=Unit.CLIENT,
                            release=_RELEASE, description="Flower DP wrapper releases")

    def results(self, delta: float | None = None) -> list[PrivacyResult]:
        """Every method's labelled result at ``delta`` (default: the target delta)."""
        delta = self._config.target_delta if delta is None else check_delta("delta", delta)
        return self._results(self._compositions, delta=delta)

    def headline(self, *, delta: float | None = None,
                 epsilon: float | None = None) -> PrivacyResult:
        """The smallest bound at ``delta`` (or at ``epsilon``: the smallest delta)."""
        return _smallest_bound(self._results(self._compositions, delta=delta, epsilon=epsilon),
                               by="delta" if epsilon is not None else "epsilon")

    def label(self, result: PrivacyResult) -> str:
        """One line: what ``result`` is (method, kind, unit, relation, sampling, release)."""
        amplification = ("" if self.amplified else
                         "; no amplification claimed (sampling not secret Poisson)")
        return (f"privfl {result.method} ({result.kind}, {result.unit} level, "
                f"{result.neighbouring}, {result.sampling}, {result.steps} release(s) of "
                f"{result.release}, delta={result.delta:.3g}{amplification})")

    # ------------------------------------------------------------------ helpers
    def _step(self, event: Any) -> NoisyStep:
        if self.amplified:
            return NoisyStep(event.noise_multiplier, event.sample_size / event.population_size,
                             Sampling.POISSON)
        return NoisyStep(event.noise_multiplier, 1.0, Sampling.NONE)

    def _results(self, compositions: list, *, delta: float | None = None,
                 epsilon: float | None = None) -> list[PrivacyResult]:
        if not compositions:  # nothing released yet
            return []
        key = (tuple((e.noise_multiplier, e.sample_size, c) for e, c in compositions),
               delta, epsilon)
        if key not in self._cache:
            report = account(self.privacy_event(compositions), delta=delta, epsilon=epsilon,
                             methods=self.methods, options=self.options)
            self._cache[key] = report.results
        return self._cache[key]

    def _check_event(self, event: Any) -> None:
        from flwr.serverapp import GaussianPrivacyEvent

        if not isinstance(event, GaussianPrivacyEvent):
            raise ValueError(f"event = {type(event).__name__} is not allowed: must be a "
                             "flwr.serverapp.GaussianPrivacyEvent")
        if event.population_size != self._config.population_size:
            raise ValueError(f"event population_size = {event.population_size} does not match "
                             f"PrivacyConfig.population_size = {self._config.population_size}")
        wrapper = getattr(self, "wrapper", None)
        if wrapper is not None and event.noise_multiplier != wrapper["noise_multiplier"]:
            raise ValueError(f"event noise_multiplier = {event.noise_multiplier} differs from "
                             f"the wrapper's {wrapper['noise_multiplier']}")


def _smallest_bound(results: list[PrivacyResult], by: str = "epsilon") -> PrivacyResult:
    """The bound with the smallest ``by`` (epsilon 0 / delta 0 before any release)."""
    if not results:
        return PrivacyResult(method="none", kind="bound", epsilon=0.0, delta=0.0,
                             unit=Unit.CLIENT.value, neighbouring="", sampling="",
                             release=_RELEASE, steps=0, note="no release composed")
    bounds = [r for r in results if r.kind == "bound" and math.isfinite(getattr(r, by))]
    if not bounds:
        raise ValueError("no method gave a finite bound: " + "; ".join(
            f"{r.method} ({r.kind}) {by} = {getattr(r, by)}" for r in results))
    return min(bounds, key=lambda r: getattr(r, by))
