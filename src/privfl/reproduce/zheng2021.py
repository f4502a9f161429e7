"""Zheng et al. 2021, *Federated f-Differential Privacy* (PriFedSync): the mu of Tables 1-3, the
epsilon each mu stands for, the batch-size ratio of Section 4.1, and PriFedSync training.

Accounting: every mu_max of Tables 1-3 by privfl's Theorem 2 (the central-limit mu, an
estimate; privfl's noise multiplier z = 2 sigma, since the paper's sigma is the noise std over
2C), and beside each the epsilon at delta = 1e-5 of the printed mu read as mu-GDP against
privfl's PLD bound of the same training (docs/accountants/federated-fdp.md). Training (quick):
PriFedSync on the MNIST 5k subset, non-IID shards, the paper's p = 1 and sigma = 1, reduced
clients, rounds and model; the paper's ordering personalised > global (Figure 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privfl.reproduce.papers import PAPERS
from privfl.reproduce.rows import Reproduction, compare
from privfl.reproduce.training import (
    PaperRun,
    Progress,
    reproduce_with_training,
    run_config,
)

#: (source, dataset, p, paper sigma, n, B, K, R, mu_max as printed)
TABLES = (
    ("Table 1", "MNIST", 1.0, 1.0, 600, 16, 38, 93, "2.71"),
    ("Table 1", "MNIST", 1.0, 0.9, 600, 16, 38, 83, "3.10"),
    ("Table 1", "MNIST", 1.0, 0.75, 600, 16, 38, 64, "3.96"),
    ("Table 1", "MNIST", 0.5, 1.0, 600, 16, 38, 194, "3.92"),
    ("Table 1", "MNIST", 0.5, 0.9, 600, 16, 38, 176, "4.51"),
    ("Table 1", "MNIST", 0.5, 0.75, 600, 16, 38, 127, "5.58"),
    ("Table 1", "MNIST", 0.25, 1.0, 600, 16, 38, 386, "5.52"),
    ("Table 1", "MNIST", 0.25, 0.9, 600, 16, 38, 325, "6.13"),
    ("Table 1", "MNIST", 0.25, 0.75, 600, 16, 38, 245, "7.75"),
    ("Table 2", "MNIST", 0.5, 1.0, 600, 8, 76, 266, "3.24"),
    ("Table 2", "MNIST", 0.5, 0.9, 600, 8, 76, 229, "3.64"),
    ("Table 2", "MNIST", 0.5, 0.75, 600, 8, 76, 191, "4.84"),
    ("Table 3", "CIFAR-10", 1.0, 1.0, 500, 16, 32, 468, "6.70"),
    ("Table 3", "CIFAR-10", 1.0, 0.75, 500, 16, 32, 321, "9.77"),
    ("Table 3", "CIFAR-10", 1.0, 0.5, 500, 16, 32, 207, "26.81"),
    ("Table 3", "CIFAR-10", 0.5, 1.0, 500, 16, 32, 904, "9.31"),
    ("Table 3", "CIFAR-10", 0.5, 0.75, 500, 16, 32, 671, "14.13"),
    ("Table 3", "CIFAR-10", 0.5, 0.5, 500, 16, 32, 405, "37.51"),
)
SECTION = {"Table 1": "Section 4.1", "Table 2": "Section 4.1", "Table 3": "Section 4.2"}
DELTA = 1e-5

#: the quick run: PriFedSync at Table 1's p = 1, sigma = 1 on the MNIST 5k subset
QUICK_ROUNDS = 40


def quick_config(private: bool) -> dict[str, Any]:
    """PriFedSync on the MNIST 5k subset (4,000 / 1,000), 20 clients of 2 label-sorted shards
    of 100, a 100-unit MLP, B = 16, K = 12, p = 1, paper sigma = 1, alpha = 0.1."""
    return {
        "name": f"zheng2021-quick-{'sigma1' if private else 'nonprivate'}", "seed": 0,
        "data": {"dataset": "mnist-5k", "test_fraction": 0.2, "partition": "shards",
                 "clients": 20, "shards_per_client": 2, "test_size": 100},
        "model": {"name": "mlp", "kwargs": {"hidden": [100]}},
        "training": {"local_steps": 12, "batch_size": 16, "sampling": "without-replacement",
                     "optimizer": "adam", "lr": 0.005},
        "privacy": ({"enabled": True, "sigma": 1.0, "clip_norm": 1.0, "delta": DELTA}
                    if private else {"enabled": False}),
        "federated": {"rounds": QUICK_ROUNDS, "client_rate": 1.0, "empty_cohort": "redraw",
                      "server_lr": 1.0, "helper": "interpolation", "alpha": 0.1},
        "run": {"threads": 1, "checkpoint_every": QUICK_ROUNDS},
    }


def _setting(dataset: str, p: float, paper_sigma: float, B: int, K: int, R: int) -> str:
    return f"{dataset}, p = {p:g}, sigma = {paper_sigma:g}, B = {B}, K = {K}, R = {R}"


def accounting(rep: Reproduction) -> None:
    """Tables 1-3: mu_max, and the epsilon of each mu against privfl's PLD bound."""
    from privfl.accounting.fdp.federated import ClientTraining
    from privfl.accounting.gdp.closed_form import gdp_closed_form
    from privfl.accounting.methods import build_accountant

    pld = build_accountant("pld")
    mus, paper_eps, bounds, labels = {}, [], [], []
    for table, dataset, p, paper_sigma, n, B, K, R, mu_text in TABLES:
        setting = _setting(dataset, p, paper_sigma, B, K, R)
        source = f"{table} ({SECTION[table]}), mu_max column"
        client = ClientTraining(records=n, batch_size=B, local_steps=K,
                                noise_multiplier=2 * paper_sigma)
        mu = client.mu(R)
        mus[(table, p, paper_sigma, B)] = mu
        rep.add(compare(
            f"mu_max, {setting}", source, mu_text, mu,
            reason="both columns: Theorem 2's central-limit mu (an estimate, not a bound), "
                   f"the paper's sigma = {paper_sigma:g} = z / 2 (privfl's noise multiplier z = "
                   f"{2 * paper_sigma:g})"))
        implied = gdp_closed_form(float(mu_text), delta=DELTA)[0]
        bound = pld.epsilon(client.event(R), DELTA).epsilon
        way = ("above privfl's bound: the paper's number is the more conservative (it "
               "overstates the privacy loss, not the privacy)" if implied > bound else
               "below privfl's bound: the paper's number understates the privacy loss")
        rep.add(compare(
            f"epsilon at delta = 1e-5, {setting}", f"{source}, read as mu-GDP", implied, bound,
            tolerance=None, basis="derived",
            reason=f"derived from the printed mu = {mu_text}: paper column = privfl's mu-GDP "
                   f"epsilon of that mu (the paper prints mu only; Theorem 2's mu is a central "
                   f"limit, an estimate, not a bound); privfl column = the PLD bound of the "
                   f"same K R = {K * R} steps (batches of B = {B} of n = {n} without "
                   f"replacement, replace-one); the paper's implied epsilon is "
                   f"{100 * abs(implied / bound - 1):.1f} % {way} "
                   "(docs/accountants/federated-fdp.md)"))
        paper_eps.append(implied)
        bounds.append(bound)
        labels.append(f"{table} {dataset[0]} p{p:g} s{paper_sigma:g} B{B}")
    ratio = sum(mus[("Table 2", 0.5, s, 8)] / mus[("Table 1", 0.5, s, 16)]
                for s in (1.0, 0.9, 0.75)) / 3
    rep.add(compare(
        "mu_max of the B = 8 runs over the B = 16 runs, mean over sigma = 1, 0.9, 0.75",
        "Table 2 caption and Section 4.1 text ('roughly 0.83x')", "0.83", ratio,
        reason="privfl column: privfl's mu of the six Table 2 runs"))
    rep.curves["zheng2021-mu"] = {
        "title": "mu_max of Tables 1-3: printed and recomputed (Theorem 2)", "xtitle": "table row",
        "ytitle": "mu_max", "log": True, "traces": [
            {"name": "paper (printed)", "x": labels, "y": [float(t[-1]) for t in TABLES],
             "dash": True},
            {"name": "privfl", "x": labels, "y": [mus[(t[0], t[2], t[3], t[5])] for t in TABLES]}]}
    rep.curves["zheng2021-epsilon"] = {
        "title": "epsilon at delta = 1e-5: the paper's mu read as mu-GDP (estimate) and privfl's "
                 "PLD bound", "xtitle": "table row", "ytitle": "epsilon", "log": True,
        "traces": [{"name": "paper's mu as mu-GDP (estimate)", "x": labels, "y": paper_eps,
                    "dash": True},
                   {"name": "privfl PLD (bound)", "x": labels, "y": bounds}]}


def quick_training(rep: Reproduction, out: Path | None, progress: Progress | None) -> None:
    """PriFedSync at Table 1's first setting (p = 1, sigma = 1), reduced."""
    private = run_config(quick_config(True), out, progress=progress)
    public = run_config(quick_config(False), out, progress=progress)
    scale = (f"reduced scale and data: the MNIST 5k subset (4,000 training images) on 20 clients "
             f"of 200 label-sorted records, a 100-unit MLP, K = 12, {QUICK_ROUNDS} rounds (the "
             "paper: MNIST, 100 clients of 600, its CNN, K = 38, 90 % reached at R = 93)")
    personal = private.final("personalised_accuracy")
    glob = private.final("global_accuracy")
    rep.add(compare(
        f"private personalised accuracy (%), p = 1, sigma = 1, after {QUICK_ROUNDS} rounds",
        "Table 1 (Section 4.1), Test Acc at R = 93", "90.03", 100 * personal, tolerance=None,
        reason=scale, kind="training"))
    rep.add(compare(
        f"non-private personalised accuracy (%), p = 1, after {QUICK_ROUNDS} rounds",
        "Table 1 (Section 4.1), Non-Pri Acc", "98.74",
        100 * public.final("personalised_accuracy"), tolerance=None, reason=scale,
        kind="training"))
    order = "personalised > global" if personal > glob else "global >= personalised"
    rep.add(compare(
        "private personalised vs private global accuracy", "Figure 1 (Section 4.1)",
        "personalised > global", order,
        reason=f"personalised {100 * personal:.1f} %, global {100 * glob:.1f} %",
        kind="training"))
    rep.notes.append(f"quick training: personalised {100 * personal:.1f} %, global "
                     f"{100 * glob:.1f} % (private), {private.seconds + public.seconds:.0f} s; "
                     f"{scale}")
    traces = []
    for label, run in (("private", private), ("non-private", public)):
        for key, dash in (("personalised_accuracy", False), ("global_accuracy", True)):
            x, y = run.series(key)
            traces.append({"name": f"{label} {key.split('_')[0]}", "x": x,
                           "y": [100 * v for v in y], "dash": dash})
    rep.curves["zheng2021-training"] = {
        "title": "PriFedSync, quick scale: accuracy per round (Table 1's p = 1, sigma = 1)",
        "xtitle": "round", "ytitle": "accuracy (%)", "log": False, "traces": traces,
        "note": "solid: personalised models, dashed: the global model (the paper, Table 1: "
                "90.03 % personalised at R = 93, 98.74 % non-private)"}


def paper_runs() -> list[PaperRun]:
    """Table 1's rounds to 90 %: the paper's clients, rounds and CNN, on the paper's MNIST
    (downloaded: data.download) where available."""
    runs = []
    for table, _, p, paper_sigma, _n, _B, _K, R, _ in TABLES[:9]:
        stem = f"fmnist-p{p:g}-sigma{paper_sigma:g}"
        runs.append(PaperRun(
            name=f"zheng2021-mnist-p{p:g}-sigma{paper_sigma:g}", config=f"zheng2021/{stem}.yaml",
            overrides=("data.dataset=mnist", "stop.target_accuracy=0.9",
                       f"federated.rounds={2 * R}"),
            quantity=f"rounds to 90 % personalised accuracy, MNIST, p = {p:g}, "
                     f"sigma = {paper_sigma:g}",
            source=f"{table} (Section 4.1), R column", paper=str(R), metric="rounds_to_target",
            hours=R * 2.0 / 60 * (2.0 if p == 1.0 else 1.0 if p == 0.5 else 0.5),
            paper_dataset="MNIST (privfl downloads it with --set data.download=true, or "
                          "pre-place the IDX files in privfl's data folder)", gpu=True,
            tolerance=0.1))
    return runs


def reproduce(scale: str, out: Path | None = None, *, training: bool = True,
              dry_run: bool = False, progress: Progress | None = None) -> Reproduction:
    """The paper's rows at ``scale`` (:func:`.training.reproduce_with_training`)."""
    return reproduce_with_training(
        Reproduction("zheng2021", PAPERS["zheng2021"].title, scale), scale, out,
        accounting=accounting, quick=quick_training, paper=paper_runs, training=training,
        dry_run=dry_run, progress=progress,
        unwired=("CIFAR-10 (Table 3) training is not wired: configs/zheng2021/cifar10-*.yaml "
                 "hold the settings (the data: --set data.download=true)"))
