"""Xie et al. 2023, *privacy and certified robustness in federated learning*: the epsilons of
Tables 4-8 and Figure 9, privfl's bounds beside them, and UserDP-FedAvg training.

Accounting: each epsilon of Tables 4-8 (UserDP-FedAvg: Poisson client sampling at q, T rounds;
InsDP-FedAvg: Poisson batches at B/n, V T steps, the maximum over equal users) by privfl's RDP
accountant with the paper's options (legacy orders 1.1-63, the classic conversion), and beside it
privfl's PLD bound of the same event; Figure 9's InsDP-FedSGD epsilons (Section 6.3.1 text:
0.87 and Dopamine's 2.70 at round 200) with privfl's bound, which charges every round. The
parameters the paper does not print (T, and V = 26 against the printed 25) are fitted, with the
printed and the stated accounting beside (:mod:`~privfl.reproduce.xie2023_fit`). Training
(quick): UserDP-FedAvg at Table 4's privacy setting on the MNIST 5k subset's digits 0 and 1, and
the certified-robustness shapes of Figures 1, 2, 5(a) and 8 from Monte Carlo replicas
(:mod:`~privfl.reproduce.xie2023_certification`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from privfl.reproduce import xie2023_certification as certification
from privfl.reproduce.papers import PAPERS
from privfl.reproduce.rows import Reproduction, compare
from privfl.reproduce.seeds import DEFAULT_SEEDS, compare_spread, run_seeds, spread
from privfl.reproduce.training import (
    PaperRun,
    Progress,
    reproduce_with_training,
)
from privfl.reproduce.xie2023_fit import fit_rows

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
#: what else of a table's setting is fitted, not printed (xie2023_fit)
FITTED = {"Table 7": "; V = 26 fitted, Table 2 prints V = 25"}
#: Table 4's clean accuracy (%), as printed: sigma (None: non-private) -> accuracy
TABLE4_ACCURACY = {None: "99.66", 1.0: "99.59", 3.0: "72.79"}
#: Figure 9: InsDP-FedSGD, sigma = 3, p = 0.4, N = 30, T = 200, delta = 1e-4 (not stated)
FIGURE9 = {"sigma": 3.0, "p": 0.4, "users": 30, "rounds": 200, "delta": 1e-4}
#: the wide tolerance of a quick training row on the paper's task at reduced scale
TRAINING_TOLERANCE = 0.02


def _epsilon(method: str, z: float, q: float, steps: int, delta: float, paper: bool) -> float:
    from privfl.accounting.events import NoisyStep, PrivacyEvent, Sampling
    from privfl.accounting.methods import build_accountant
    from privfl.algorithms.insdp_plan import PAPER_OPTIONS

    event = PrivacyEvent(((NoisyStep(z, q, Sampling.POISSON), steps),))
    accountant = build_accountant(method, PAPER_OPTIONS if paper else None)
    return accountant.epsilon(event, delta).epsilon


def accounting(rep: Reproduction) -> None:
    """Tables 4-8 (paper's accounting and privfl's PLD) and Figure 9."""
    for table, (what, q, steps, delta, grid) in TABLES.items():
        noises, printed, ours, bounds = [], [], [], []
        for z, text in grid.items():
            setting = f"{what}, sigma = {z:g}, delta = {delta:g}"
            paper_eps = _epsilon("rdp", z, q, steps, delta, paper=True)
            bound = _epsilon("pld", z, q, steps, delta, paper=False)
            rep.add(compare(
                f"epsilon, {setting}", SOURCE.format(table=table), text, paper_eps,
                reason="both columns: the fitted accounting that reproduces the printed "
                       "values (Poisson subsampled-Gaussian RDP over the orders 1.1-63, classic "
                       f"conversion, {steps} steps: the paper prints no T{FITTED.get(table, '')}), "
                       "privfl's RDP accountant; the paper states sampling without replacement "
                       "and Balle et al.'s conversion (the fit rows)"))
            rep.add(compare(
                f"epsilon, privfl's tightest bound, {setting}", SOURCE.format(table=table), text,
                bound, tolerance=None,
                reason=f"a bound privfl proves tighter: PLD (pessimistic discretisation) of the "
                       f"same {steps} Poisson steps, {paper_eps / bound:.1f}x below the paper's "
                       "RDP number (the paper's is the more conservative; docs/accountants/"
                       "rdp.md, docs/experiments/xie2023.md)"))
            noises.append(z)
            printed.append(float(text))
            ours.append(paper_eps)
            bounds.append(bound)
        rep.curves[f"xie2023-{table.lower().replace(' ', '')}"] = {
            "title": f"{table}: epsilon against sigma ({what})", "xtitle": "sigma",
            "ytitle": "epsilon", "log": True, "traces": [
                {"name": "paper (printed)", "x": noises, "y": printed, "dash": True},
                {"name": "privfl, the paper's accounting", "x": noises, "y": ours},
                {"name": "privfl PLD (bound)", "x": noises, "y": bounds}]}
    fit_rows(rep)
    figure9(rep)


def figure9(rep: Reproduction) -> None:
    """InsDP-FedSGD's epsilon per round: the paper's (user subsampling hidden), Dopamine's and
    privfl's bound (every round charged)."""
    f = FIGURE9
    rounds = list(range(10, f["rounds"] + 1, 10))
    for m, paper_text, dopamine_text in ((10, "0.87", "2.70"), (20, None, None)):
        z = f["sigma"] * math.sqrt(m)  # Proposition 2: the mean of m updates, noise sigma sqrt(m)
        rate, full = f["p"] * m / f["users"], f["p"]
        curves = {"the paper's accounting (rate p m / N)": (z, rate, True, True),
                  "Dopamine's accounting (rate p)": (z, full, True, True),
                  "privfl PLD, every round charged (bound)": (z, full, False, False)}
        traces = []
        for name, (zz, qq, paper, dash) in curves.items():
            ys = [_epsilon("rdp" if paper else "pld", zz, qq, t, f["delta"], paper)
                  for t in rounds]
            traces.append({"name": name, "x": rounds, "y": ys, "dash": dash})
        ours, dopamine, bound = (trace["y"][-1] for trace in traces)
        label = f"InsDP-FedSGD, m = {m} of N = 30, sigma = 3, p = 0.4, T = 200, delta = 1e-4"
        if paper_text is not None:
            near = {name: _epsilon("rdp", z, qq, f["rounds"], 1.5e-4, True)
                    for name, qq in (("ours", rate), ("dopamine", full))}
            unstated = (f"delta is not stated: privfl takes 1e-4 (docs/experiments/xie2023.md), "
                        f"at which the paper's accounting gives {ours:.4f} and Dopamine's "
                        f"{dopamine:.4f}, both 2-3 % above the text's 0.87 and 2.70 (delta = "
                        f"1.5e-4 would give {near['ours']:.3f} and {near['dopamine']:.3f})")
            rep.add(compare(
                f"epsilon at round 200, {label}", "Figure 9(a) and Section 6.3.1 text",
                paper_text, ours,
                reason="both columns: the paper's accounting (user subsampling at q = m/N "
                       f"amplifies; RDP, classic conversion); {unstated}"))
            rep.add(compare(
                f"Dopamine's epsilon at round 200, {label}", "Figure 9(a) and Section 6.3.1 text",
                dopamine_text, dopamine,
                reason=f"both columns: Dopamine's accounting (no user subsampling); {unstated}"))
            rep.add(compare(
                f"epsilon at round 200, privfl's bound, {label}",
                "Figure 9(a) and Section 6.3.1 text", paper_text, bound, tolerance=None,
                reason="an estimate the paper presents as a bound: its rate p m / N assumes a "
                       "user's selection stays hidden, which the user's other records can "
                       "reveal; privfl's PLD bound (delta = 1e-4) charges every round: "
                       f"{bound / float(paper_text):.1f}x the paper's {paper_text} (the paper "
                       "understates the privacy loss), below Dopamine's "
                       "(docs/experiments/xie2023.md)"))
        rep.curves[f"xie2023-figure9-m{m}"] = {
            "title": f"Figure 9: epsilon per round, {label}", "xtitle": "round",
            "ytitle": "epsilon", "log": False, "traces": traces + (
                [{"name": "paper: 0.87 (text)", "x": [200], "y": [0.87], "dash": True},
                 {"name": "paper: Dopamine 2.70 (text)", "x": [200], "y": [2.70], "dash": True}]
                if m == 10 else [])}


def quick_config(z: float | None) -> dict[str, Any]:
    """UserDP-FedAvg at Table 4's privacy setting (N = 200, q = 0.1, T = 3, S = 0.7) on the
    MNIST 5k subset's digits 0 and 1 (800 / 200), 4 records per user (the paper: 63)."""
    name = "nonprivate" if z is None else f"z{z:g}"
    return {
        "name": f"xie2023-quick-table4-{name}", "seed": 0,
        "data": {"dataset": "mnist-5k", "classes": [0, 1], "test_fraction": 0.21,
                 "partition": "iid", "clients": 200, "train_size": 4, "test_size": None},
        "model": {"name": "xie2023-mnist-cnn", "kwargs": {"num_classes": 2}},
        "training": {"local_steps": 10, "batch_size": 4, "lr": 0.02,
                     "sampling": "without-replacement", "optimizer": "momentum",
                     "momentum": 0.9, "weight_decay": 0.0005},
        "privacy": ({"enabled": False} if z is None else
                    {"enabled": True, "noise_multiplier": z, "clip_norm": 0.7,
                     "delta": 0.0029, "accountants": ["rdp", "pld"]}),
        "federated": {"algorithm": "dp-fedavg", "rounds": 3, "client_sampling": "poisson",
                      "client_rate": 0.1, "server_lr": 1.0, "clipping": "flat",
                      "paper_accounting": z is not None},
        "run": {"threads": 1},
    }


def quick_training(rep: Reproduction, out: Path | None, progress: Progress | None,
                   seeds: int) -> None:
    """Table 4's clean accuracy at three noise levels, reduced, at ``seeds`` seeds
    (:func:`.seeds.compare_spread`: at 4 records per user the printed accuracy cannot be
    reproduced, so the rows cannot match)."""
    scale = ("reduced scale: the MNIST 5k subset's digits 0 and 1 (800 training images, 4 per "
             "user; the paper: 12,665, 63 per user), 200 test images (accuracy moves in "
             "0.5-point steps)")
    traces = []
    for z, text in TABLE4_ACCURACY.items():
        runs = run_seeds(quick_config(z), seeds, out, progress=progress)
        label = "non-private" if z is None else f"sigma = {z:g}"
        rep.add(compare_spread(
            f"clean accuracy (%), UserDP-FedAvg, Table 4 setting, {label}",
            "Table 4 (Appendix B.1.1), Clean Acc. row", text,
            spread(runs, lambda r: 100 * r.final("global_accuracy")), scale=scale))
        if z is not None:
            (paper,) = [r for r in runs[0].summary["privacy"] if r.get("scope") == "paper"]
            rep.add(compare(
                f"epsilon of the trained run, paper scope, Table 4 setting, {label}",
                SOURCE.format(table="Table 4"), TABLES["Table 4"][4][z], paper["epsilon"],
                reason="a check, repeating Table 4's accounting row: the run's own privacy "
                       "plan (privfl run's privacy.json, scope paper; the same at every seed)",
                kind="training", basis="check"))
        x, _ = runs[0].series("global_accuracy")
        ys = [run.series("global_accuracy")[1] for run in runs]
        traces.append({"name": label, "x": x,
                       "y": [100 * sum(c) / len(c) for c in zip(*ys, strict=True)]})
    certification.quick_rows(rep, progress)
    rep.curves["xie2023-training"] = {
        "title": f"UserDP-FedAvg, quick scale (Table 4 setting, MNIST 5k digits 0 and 1), mean "
                 f"of {seeds} seeds", "xtitle": "round", "ytitle": "accuracy (%)", "log": False,
        "traces": traces,
        "note": "the global model's accuracy per round (the paper, Table 4: 99.66 % non-private, "
                "99.59 % at sigma = 1, 72.79 % at sigma = 3)"}


def paper_runs() -> list[PaperRun]:
    """Table 4's clean accuracy at the paper's scale: MNIST digits 0 and 1, 200 users of 63."""
    runs = []
    for z, text in TABLE4_ACCURACY.items():
        stem = "nonprivate" if z is None else f"z{z:g}"
        runs.append(PaperRun(
            name=f"xie2023-mnist01-table4-{stem}", config=f"xie2023/fmnist01-user-table4-{stem}"
            ".yaml", overrides=("data.dataset=mnist", "data.train_size=63",
                                "training.batch_size=60"),
            quantity=f"clean accuracy (%), UserDP-FedAvg, Table 4 setting, "
                     f"{'non-private' if z is None else f'sigma = {z:g}'}",
            source="Table 4 (Appendix B.1.1), Clean Acc. row", paper=text,
            metric="global_accuracy", hours=0.05, gpu=False,
            paper_dataset="MNIST digits 0 and 1 (privfl downloads MNIST with --set "
                          "data.download=true)", tolerance=TRAINING_TOLERANCE))
    return runs


def reproduce(scale: str, out: Path | None = None, *, training: bool = True,
              dry_run: bool = False, progress: Progress | None = None,
              seeds: int = DEFAULT_SEEDS) -> Reproduction:
    """The paper's rows at ``scale`` (:func:`.training.reproduce_with_training`)."""
    rep = reproduce_with_training(
        Reproduction("xie2023", PAPERS["xie2023"].title, scale), scale, out,
        accounting=accounting, quick=quick_training, paper=paper_runs, training=training,
        dry_run=dry_run, progress=progress, seeds=seeds,
        unwired=("CIFAR-10 and Sent140 (Tables 5, 6, 8) training is not wired: those tasks are "
                 "not available offline; configs/xie2023/fmnist01-* run their privacy settings "
                 "on Fashion-MNIST (docs/experiments/xie2023.md)"))
    if scale == "paper" and training:
        certification.paper_plan_rows(rep)
    return rep
