"""Paper-scale runs on the papers' own natural-user and EMNIST data, for ``privfl reproduce
PAPER --scale paper``: :func:`natural_data_runs` gives the :class:`~.training.PaperRun` rows
that a paper's ``paper_runs()`` adds to its list. :func:`~.training.paper_rows` runs (or, with
``--dry-run``, lists as runnable) each one whose data are on this machine and says how to get
the data of the others.

* Xie et al. 2023, Table 6: UserDP-FedAvg on LEAF's Sent140 with the two-layer LSTM on GloVe
  (``configs/xie2023/sent140-user-table6-z2.yaml``, one run per sigma of the table), and
  privfl's record-level InsDP-FedAvg counterpart (``sent140-ins-z2.yaml``; the paper has no
  Sent140 InsDP row, so it measures nothing printed and is listed without a paper value).
* Hasircioglu and Gunduz 2022, section 6: DP-DSGD on EMNIST ByClass at the paper's scale
  (``configs/hasircioglu2022/emnist-6.*.yaml``); the paper prints curves, not a final accuracy
  table, so these rows carry no paper value either.
"""

from __future__ import annotations

from privfl.reproduce.training import PaperRun

__all__ = ["SENT140_TABLE6", "natural_data_runs"]

#: Xie et al. 2023 Table 6 (UserDP-FedAvg, Sent140, q = 10/805, T = 3): sigma -> clean accuracy
SENT140_TABLE6 = {None: "64.33 %", 1.0: "62.64 %", 1.5: "60.76 %", 1.7: "59.57 %",
                  2.0: "58.00 %", 3.0: "55.28 %"}
_SENT140 = "LEAF Sent140 (data.root/sent140) and GloVe 6B 300-d (data/glove.6B.300d.txt)"
_EMNIST = "EMNIST ByClass (data.root/emnist; --set data.download=true)"
#: the EMNIST configs: scenario -> accounting schemes with a config
_EMNIST_SCHEMES = {"6.1": ("nonprivate", "per-s1-convexity", "theorem-4.1", "wcs", "ols"),
                   "6.2": ("nonprivate", "per-s1-convexity", "wcs", "ols")}


def _xie2023() -> list[PaperRun]:
    runs = []
    for z, accuracy in SENT140_TABLE6.items():
        overrides = (("privacy.enabled=false", "federated.paper_accounting=false") if z is None
                     else (f"privacy.noise_multiplier={z:g}",))
        stem = "nonprivate" if z is None else f"z{z:g}"
        runs.append(PaperRun(
            name=f"xie2023-sent140-table6-{stem}", config="xie2023/sent140-user-table6-z2.yaml",
            overrides=overrides,
            quantity="clean accuracy (%), UserDP-FedAvg, Sent140, "
                     + ("non-private" if z is None else f"sigma = {z:g}"),
            source="Table 6 (Appendix B.1.1), Clean Acc. row", paper=accuracy,
            metric="global_accuracy", hours=1.5, gpu=True, paper_dataset=_SENT140,
            fallback=f"privfl run configs/xie2023/fmnist01-user-table6-{stem}.yaml (Table 6's "
                     "privacy setting on Fashion-MNIST, here)"))
    runs.append(PaperRun(
        name="xie2023-sent140-insdp-z2", config="xie2023/sent140-ins-z2.yaml",
        quantity="clean accuracy (%), InsDP-FedAvg (record level), Sent140, sigma = 2 "
                 "(privfl's counterpart of Table 6; not in the paper)",
        source="none (the paper runs InsDP-FedAvg on MNIST and CIFAR only)", paper="-",
        metric="global_accuracy", hours=4.0, gpu=True, paper_dataset=_SENT140,
        fallback="none on other data (the paper has no record-level Sent140 run)"))
    return runs


def _hasircioglu2022() -> list[PaperRun]:
    runs = []
    for scenario, schemes in _EMNIST_SCHEMES.items():
        for scheme in schemes:
            label = "non-private" if scheme == "nonprivate" else f"noise by {scheme}"
            runs.append(PaperRun(
                name=f"hasircioglu2022-emnist-{scenario}-{scheme}",
                config=f"hasircioglu2022/emnist-{scenario}-{scheme}.yaml",
                quantity=f"test accuracy (%) after 1,500 iterations, section {scenario}, {label}",
                source=f"section {scenario} (accuracy curves; no printed value)",
                paper="-", metric="global_accuracy", hours=3.0, gpu=True,
                paper_dataset=_EMNIST,
                fallback=f"privfl run configs/hasircioglu2022/fmnist-{scenario}-{scheme}.yaml "
                         "(the Fashion-MNIST substitute, here)"))
    return runs


def natural_data_runs(paper: str) -> list[PaperRun]:
    """The paper-scale runs of ``paper`` (``xie2023`` or ``hasircioglu2022``) on its own
    natural-user or EMNIST data; ``[]`` for the other papers."""
    if not isinstance(paper, str):
        raise ValueError(f"paper = {paper!r} is not allowed: must be a paper's name")
    return {"xie2023": _xie2023, "hasircioglu2022": _hasircioglu2022}.get(paper, list)()
