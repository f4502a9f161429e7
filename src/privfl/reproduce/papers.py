"""The papers ``privfl reproduce`` knows: name, title, what each reproduction covers, and the
module that computes it (imported on first use, so ``privfl reproduce --list`` stays fast)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["PAPERS", "SCALES", "Paper", "paper"]

#: ``quick``: the accounting in full, training at a reduced scale on built-in or Debian data;
#: ``paper``: the accounting, and the paper's training runs from configs/ (long; GPU advised)
SCALES = ("quick", "paper")


@dataclass(frozen=True)
class Paper:
    name: str
    title: str
    covers: str
    module: str

    @property
    def cite(self) -> str:
        """The authors and year (the title up to its first ', ' after the year)."""
        return self.title[: self.title.index("20") + 4]

    def load(self) -> Any:
        """The module with ``reproduce(scale, out, *, training, dry_run, progress)``."""
        return importlib.import_module(self.module)


PAPERS: dict[str, Paper] = {p.name: p for p in (
    Paper("zheng2021", "Zheng et al. 2021, Federated f-Differential Privacy (PriFedSync)",
          "mu_max of Tables 1-3 (18 values), the epsilon each mu stands for against privfl's "
          "PLD bound, Table 2's batch-size ratio and Total columns, PriFedSync training at "
          "three seeds (Tables 1-2 accuracy and rounds to target, the orderings of Figures 1, "
          "2 and 5)",
          "privfl.reproduce.zheng2021"),
    Paper("zhang2022", "Zhang, Chen and Yang 2022, Towards achieving near-optimal utility for "
          "privacy-preserving federated learning via data generation and parameter distortion",
          "Lemma 6.8's noise against privfl's exact calibration, Lemma 6.7's TV sandwich, "
          "Theorem 6.10, Lemmas 6.2 and 6.9 by Monte Carlo, the counterexamples to Lemmas 6.3, "
          "6.5 and 6.6, Theorems 6.11-6.14 (a theory paper: no training)",
          "privfl.reproduce.zhang2022"),
    Paper("xie2023", "Xie et al. 2023, Unraveling the connections between privacy and certified "
          "robustness in federated learning (UserDP-FedAvg, InsDP-FedSGD/FedAvg)",
          "the epsilons of Tables 4-8 (35 values) by the paper's RDP and privfl's PLD bound, "
          "the unprinted T and V fitted (residual, printed V = 25, stated accounting), "
          "Figure 9 (InsDP-FedSGD against Dopamine), UserDP-FedAvg accuracy (Table 4), "
          "certified-k shapes of Figures 1, 2, 5(a), 8 from Monte Carlo replicas",
          "privfl.reproduce.xie2023"),
    Paper("hasircioglu2022", "Hasircioglu and Gunduz 2022, Privacy amplification via random "
          "participation in federated learning",
          "the noise of Sections 6.1-6.2 per scheme (Theorem 4.1, WCS, OLS), the audit of "
          "Theorem 4.1 maximised over the free gradient scale, a composed epsilon, the claims "
          "of Figures 1-5, the accuracy ordering of Figures 6-7 at three seeds",
          "privfl.reproduce.hasircioglu2022"),
    Paper("asoodeh2021", "Asoodeh et al. 2021, Differentially private federated learning: an "
          "information-theoretic perspective",
          "Figure 2's delta(epsilon) curves (Theorem 2, q = 0.1, 0.2, 0.3) and epsilon at three "
          "deltas, the sharpened chain, Corollary 3's Eq. (12), the saturation limit of "
          "independent rounds (no training in the paper)", "privfl.reproduce.asoodeh2021"),
)}


def paper(name: str) -> Paper:
    """The paper ``name``; ValueError naming the allowed ones."""
    if name not in PAPERS:
        raise ValueError(f"paper = {name!r} is not known: must be one of {', '.join(PAPERS)} "
                         "(privfl reproduce --list says what each covers)")
    return PAPERS[name]
