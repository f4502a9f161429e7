"""Xie et al. 2023's printed privacy tables (Appendix B.1.1) and the paper's accounting of them:
shared by the reproduction (:mod:`.xie2023`), the fit of the unprinted step counts
(:mod:`.xie2023_fit`) and the certification shapes (:mod:`.xie2023_certification`)."""

from __future__ import annotations

__all__ = ["SOURCE", "TABLES"]

#: table -> (what, q, steps per round x rounds, delta, {sigma (= z): epsilon as printed})
TABLES: dict[str, tuple[str, float, int, float, dict[float, str]]] = {
    "Table 4": ("UserDP-FedAvg, MNIST: q = 0.1, T = 3", 0.1, 3, 0.0029,
                {0.5: "6.9269", 0.6: "4.8913", 0.8: "2.8305", 1.0: "1.8504", 1.5: "0.8694",
                 1.8: "0.6298", 2.3: "0.4187", 3.0: "0.2808"}),
    "Table 5": ("UserDP-FedAvg, CIFAR: q = 0.2, T = 1", 0.2, 1, 0.0029,
                {1.7: "0.8781", 2.3: "0.546", 2.6: "0.4527", 3.0: "0.3663", 4.0: "0.2444",
                 6.0: "0.1451"}),
    "Table 6": ("UserDP-FedAvg, Sent140: q = 10/805, T = 3", 10 / 805, 3, 1e-6,
                {1.0: "1.7151", 1.5: "0.7382", 1.7: "0.579", 2.0: "0.4102", 3.0: "0.2247"}),
    "Table 7": ("InsDP-FedAvg, MNIST: q = 50/1266, V = 26, T = 3", 50 / 1266, 78, 1e-5,
                {1.0: "3.5691", 2.0: "1.0587", 3.0: "0.6373", 4.0: "0.4589", 5.0: "0.3593",
                 8.0: "0.2484", 10.0: "0.2251", 15.0: "0.2029"}),
    "Table 8": ("InsDP-FedAvg, CIFAR: q = 0.05, V = 100, T = 1", 0.05, 100, 1e-5,
                {1.0: "4.6978", 2.0: "1.4949", 3.0: "0.9067", 4.0: "0.6546", 5.0: "0.513",
                 6.0: "0.4221", 7.0: "0.3587", 8.0: "0.3158"}),
}
SOURCE = "{table} (Appendix B.1.1), epsilon row"


def _epsilon(method: str, z: float, q: float, steps: int, delta: float, paper: bool) -> float:
    from privfl.accounting.events import NoisyStep, PrivacyEvent, Sampling
    from privfl.accounting.methods import build_accountant
    from privfl.algorithms.insdp_plan import PAPER_OPTIONS

    event = PrivacyEvent(((NoisyStep(z, q, Sampling.POISSON), steps),))
    accountant = build_accountant(method, PAPER_OPTIONS if paper else None)
    return accountant.epsilon(event, delta).epsilon
