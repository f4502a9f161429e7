"""Privacy cards, plots, run-directory files and report.md."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from rich.console import Console

from privfl.algorithms import PriFedSync
from privfl.data import federate_iid, synthetic_dataset
from privfl.fl import LocalTrainingSpec
from privfl.models import build_model
from privfl.runs import (
    RunDirectory,
    card_markdown,
    json_safe,
    plot_accuracy,
    plot_privacy,
    render_card,
    run_report_markdown,
)
from privfl.runs.rounding import format_bound

PNG = b"\x89PNG\r\n\x1a\n"


def prifedsync_card(algorithm, rounds):
    """The card PriFedSync's privacy plan builds (what `privfl run` prints)."""
    return algorithm.plan.card(rounds)


def _algorithm(spec, **kwargs):
    full = synthetic_dataset(120, 3, (1, 2, 2), seed=0)
    train, test = full.split(0.25, seed=0)
    data = federate_iid(train, test, num_clients=3, size=30, test_size=5, seed=0)
    torch.manual_seed(0)
    model = build_model("logreg", input_shape=(1, 2, 2), num_classes=3)
    return PriFedSync(model, spec, data, **kwargs)


@pytest.fixture(scope="module")
def private_algorithm():
    spec = LocalTrainingSpec(local_steps=4, batch_size=6, clip_norm=1.5, noise_multiplier=1.8)
    return _algorithm(spec, client_rate=0.5, empty_cohort="skip", delta=1e-6)


def test_private_card_names_every_label(private_algorithm):
    card = prifedsync_card(private_algorithm, rounds=10)
    for key in ("unit", "neighbouring", "sampling", "noise", "clipping", "steps", "delta",
                "release", "threat model"):
        assert key in card, key
    assert card["unit"].startswith("record")
    assert card["neighbouring"].startswith("replace-one")
    assert "without replacement" in card["sampling"] and "6/30" in card["sampling"]
    assert "Poisson, p = 0.5" in card["sampling"] and "skip" in card["sampling"]
    assert "paper sigma = 0.9" in card["noise"] and "z = 1.8" in card["noise"]
    assert "C = 1.5" in card["clipping"]
    assert "4*10 = 40" in card["steps"]
    assert card["delta"] == 1e-6
    assert "batches, the cohorts and the noise must stay secret" in card["threat model"]
    assert "NOT cryptographically secure" in card["randomness"]


def test_rendered_card_labels_bound_and_estimate(private_algorithm):
    console = Console(record=True, width=160)
    results = private_algorithm.privacy(10)
    render_card(console, "privacy card", prifedsync_card(private_algorithm, 10), results)
    text = console.export_text()
    for word in ("bound", "estimate", "gdp-clt", "pld", "weak", "strong", "replace-one",
                 "record", "1e-06"):
        assert word in text, word
    weak_mu = next(r.extras["mu"] for r in results
                   if r.method == "gdp-clt" and r.extras["scope"] == "weak")
    # printed rounded up (privfl.runs.rounding): 2.617125... shows 2.61713, not 2.61712
    shown = format_bound(weak_mu)
    assert shown in text and float(shown) >= weak_mu
    markdown = card_markdown(prifedsync_card(private_algorithm, 10), results)
    assert "| pld | **bound** | weak |" in markdown
    assert "| gdp-clt | **estimate** | weak |" in markdown


def test_non_private_card_says_so():
    spec = LocalTrainingSpec(local_steps=2, batch_size=6, clip_norm=None)
    algorithm = _algorithm(spec)
    card = prifedsync_card(algorithm, 3)
    assert card["privacy"].startswith("NONE") and "no guarantee" in card["privacy"]
    console = Console(record=True, width=160)
    render_card(console, "card", card, [])
    assert "NONE" in console.export_text()


SEEDED_TEXT = (
    "seeded: the noise, the local batches and the cohorts (client sampling) are reproducible "
    "from seed = 7 (the seed in config.yaml) and therefore known to anyone holding the config; "
    "the guarantee holds only against an adversary who does not know the seed (NOT "
    "cryptographically secure: set privacy.secure: true in production)"
)
SECURE_TEXT = (
    "secure: the noise, the local batches and the cohorts (client sampling) are drawn from "
    "os.urandom (the operating system's CSPRNG), not reproducible (dropout masks too); seed = 7 "
    "drives only the data partition and the model initialisation, which the guarantee does not "
    "rely on"
)


@pytest.mark.parametrize(("flags", "expected"), [
    ({}, SEEDED_TEXT),
    ({"secure": True}, SECURE_TEXT),
    ({"secure_noise": True}, SECURE_TEXT),  # the deprecated alias means the same
])
def test_card_says_which_randomness_is_secure(flags, expected):
    spec = LocalTrainingSpec(local_steps=2, batch_size=6, clip_norm=1.0, noise_multiplier=2.0,
                             **flags)
    algorithm = _algorithm(spec, seed=7)
    card = prifedsync_card(algorithm, 1)
    assert card["randomness"] == expected
    # the same words reach report.md and the printed card
    assert f"| randomness | {expected} |" in card_markdown(card, algorithm.privacy(1))
    console = Console(record=True, width=400)
    render_card(console, "card", card, [])
    assert expected in " ".join(console.export_text().split())


def test_non_private_card_states_its_randomness():
    spec = LocalTrainingSpec(local_steps=2, batch_size=6, clip_norm=None)
    seeded = prifedsync_card(_algorithm(spec, seed=7), 1)["randomness"]
    assert seeded == ("seeded: the local batches and the cohorts (client sampling) are "
                      "reproducible from seed = 7 (the seed in config.yaml) and therefore known "
                      "to anyone holding the config")
    spec = LocalTrainingSpec(local_steps=2, batch_size=6, clip_norm=None, secure=True)
    secure = prifedsync_card(_algorithm(spec, seed=7), 1)["randomness"]
    assert secure.startswith("secure: the local batches and the cohorts (client sampling) are "
                             "drawn from os.urandom")


def _rows(n):
    return [{"round": r, "personalised_accuracy": 0.5 + 0.01 * r, "global_accuracy": 0.3,
             "personalised_accuracy_cohort": math.nan, "mu": 0.1 * r, "epsilon": 0.5 * r,
             "privacy": [
                 {"method": "pld", "kind": "bound", "scope": "weak", "epsilon": 0.5 * r,
                  "delta": 1e-5},
                 {"method": "gdp-clt", "kind": "estimate", "scope": "weak",
                  "epsilon": 0.4 * r, "delta": 1e-5, "mu": 0.1 * r}]}
            for r in range(1, n + 1)]


def test_privacy_series_are_keyed_by_method_kind_and_scope():
    from privfl.runs.plots import privacy_series

    series = privacy_series(_rows(4))
    assert set(series) == {("pld", "bound", "weak"), ("gdp-clt", "estimate", "weak")}
    assert series[("pld", "bound", "weak")] == ([1, 2, 3, 4], [0.5, 1.0, 1.5, 2.0])
    mus = privacy_series(_rows(3), "mu")
    assert list(mus) == [("gdp-clt", "estimate", "weak")]
    assert mus[("gdp-clt", "estimate", "weak")][1] == pytest.approx([0.1, 0.2, 0.3])
    # malformed entries (a torn or hand-edited metrics.jsonl) are skipped, not plotted
    assert privacy_series([{"round": 1, "privacy": ["x", {"method": "pld"}]}]) == {}


def test_plots_are_png(tmp_path):
    labels = {"personalised_accuracy": "personalised", "global_accuracy": "global"}
    assert plot_accuracy(_rows(5), tmp_path / "a.png", labels, target=0.9).read_bytes()[:8] == PNG
    assert plot_privacy(_rows(5), tmp_path / "p.png", delta=1e-5).read_bytes()[:8] == PNG
    # empty and non-private runs still give a figure
    assert plot_accuracy([], tmp_path / "e.png").read_bytes()[:8] == PNG
    rows = [{"round": 1, "personalised_accuracy": 0.2, "global_accuracy": 0.1}]
    assert plot_privacy(rows, tmp_path / "n.png").read_bytes()[:8] == PNG


def test_run_directory_checkpoints_and_metrics(tmp_path):
    directory = RunDirectory(tmp_path / "run")
    directory.create()
    with pytest.raises(ValueError, match="already holds a run"):
        (directory.config.write_text("x"), directory.create())
    for r in (1, 2, 3, 10):
        directory.checkpoint(r).write_bytes(b"x")
    (directory.checkpoints / "notes.txt").write_text("ignored")
    assert [r for r, _ in directory.list_checkpoints()] == [1, 2, 3, 10]
    directory.prune_checkpoints(2)
    assert [r for r, _ in directory.list_checkpoints()] == [3, 10]
    directory.write_metrics([{"round": 1, "x": math.inf}])
    directory.append_metrics({"round": 2, "x": np.float64(0.5)})
    assert directory.read_metrics() == [{"round": 1, "x": "inf"}, {"round": 2, "x": 0.5}]


def test_json_safe():
    assert json_safe({"a": (1.0, math.nan, -math.inf), "b": np.int64(3)}) == {
        "a": [1.0, "nan", "-inf"], "b": 3}


def test_report_markdown(private_algorithm):
    results = private_algorithm.privacy(5)
    summary = {"name": "t", "rounds_completed": 5, "rounds_planned": 9, "stop_reason": "budget",
               "final": {"personalised_accuracy": 0.81, "global_accuracy": 0.42},
               "metric_labels": dict(private_algorithm.metric_labels),
               "target_accuracy": 0.8, "target_metric": "personalised", "rounds_to_target": 4,
               "run_dir": "runs/t"}
    text = run_report_markdown(summary, prifedsync_card(private_algorithm, 5), results,
                               _rows(5), setup={"dataset": "synthetic"})
    assert "81.00 %" in text and "42.00 %" in text
    assert "privacy budget" in text and "accuracy.png" in text and "privacy.png" in text
    assert "--resume runs/t" in text and "**bound**" in text and "**estimate**" in text
    # the last round's (released) model, labelled; no "best" round picked on the test set
    assert "| personalised (mean over clients), last round (5: the released model) | 81.00 % |" \
        in text
    assert "| best " not in text
