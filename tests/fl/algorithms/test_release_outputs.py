"""What a run writes is what its guarantee covers (design principle 6).

Projected noisy SGD's last-iterate guarantee must hold for what is on disk; every metrics key and
file is classified in privacy.json's ``outputs``; ``run.outputs: guarantee-only`` keeps the
uncovered ones out of the run directory.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch

from privfl.algorithms.base import privacy_metrics
from privfl.algorithms.outputs import GENERIC_METRICS, UNCLASSIFIED
from privfl.algorithms.projected_sgd import logreg_constants
from privfl.config import ConfigError, config_from_dict
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment, build_algorithm
from privfl.runs.rundir import RunDirectory

CONFIGS = Path(__file__).resolve().parents[3] / "configs"

#: projected noisy SGD on 40 digits users, 4 rounds of 8 (trains in well under a second)
PSGD = {
    "name": "tiny-projected-sgd",
    "seed": 3,
    "data": {"dataset": "digits", "partition": "iid", "clients": 40, "train_size": 2,
             "test_size": 0},
    "model": {"name": "logreg"},
    "privacy": {"noise_multiplier": 2.0, "clip_norm": 2.0, "delta": 1e-5},
    "federated": {"algorithm": "projected-sgd", "rounds": 4, "users_per_round": 8,
                  "radius": 0.3, "lr": 0.5, "input_bound": 1.0},
    "run": {"threads": 1},
}


def _psgd(**sections):
    raw = copy.deepcopy(PSGD)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _outputs(run_dir: Path) -> dict[str, dict]:
    return {o["name"]: o for o in json.loads((run_dir / "privacy.json").read_text())["outputs"]}


# ------------------------------------------------------------ last iterate: nothing else on disk
@pytest.mark.parametrize("release", ["last", "random-stop"])
def test_finished_last_iterate_run_keeps_only_the_released_model(tmp_path, release):
    run_dir = tmp_path / "run"
    experiment = Experiment.create(_psgd(federated={"release": release}), run_dir)
    result = experiment.run()
    files = _files(run_dir)
    # no intermediate iterate, schedule or generator state is left
    assert not any(name.startswith("checkpoints") or name.endswith(".pt") and name != "model.pt"
                   for name in files), files
    assert result.summary["private_state"] == "deleted"
    model = torch.load(run_dir / "model.pt")
    released = experiment.algorithm.global_params()
    assert set(model) == set(released)
    for name, value in released.items():
        assert torch.equal(model[name], value)
    # one model only: W_tau for random stopping (W_T and tau stay secret)
    assert all(v.dim() >= 1 for v in model.values()) and len(model) == 2
    outputs = _outputs(run_dir)
    assert outputs["model.pt"]["covered"] is True
    assert "checkpoints/" not in outputs
    with pytest.raises(ConfigError, match="deleted its private state"):
        Experiment.resume(run_dir, ["federated.rounds=5"])
    assert check_run_privacy(run_dir).ok


def test_state_is_private_while_the_run_is_in_progress_and_deleted_at_the_end(tmp_path):
    run_dir = tmp_path / "run"
    first = Experiment.create(_psgd(run={"max_rounds": 2}), run_dir).run()
    assert first.stop_reason == "max_rounds"
    assert (run_dir / "checkpoints" / "round-000002.pt").is_file()
    assert _outputs(run_dir)["checkpoints/"]["covered"] is False
    assert "private state" in _outputs(run_dir)["checkpoints/"]["reason"]
    Experiment.resume(run_dir, ["run.max_rounds=null"]).run()
    assert not (run_dir / "checkpoints").exists()


def test_keeping_the_private_state_makes_the_all_iterates_bound_the_headline(tmp_path):
    run_dir = tmp_path / "run"
    result = Experiment.create(_psgd(federated={"keep_private_state": True}), run_dir).run()
    assert result.summary["private_state"] == "kept in checkpoints/"
    assert (run_dir / "checkpoints").is_dir()
    pld = next(r for r in result.privacy if r.method == "pld")
    assert pld.extras["scope"] == "all-iterates"
    rows = RunDirectory(run_dir).read_metrics()
    assert rows[-1]["epsilon_method"] == "pld" and rows[-1]["epsilon"] == pld.epsilon
    assert rows[-1]["scope"] == "all-iterates"
    assert "every intermediate model" in result.card["release"]
    # without an all-iterates accountant there is no valid headline: refused
    with pytest.raises(ConfigError, match="no all-iterates accountant"):
        build_algorithm(_psgd(federated={"keep_private_state": True},
                              privacy={"accountants": ["contraction"]}))


def test_every_round_evaluation_makes_the_all_iterates_bound_the_headline():
    algo = build_algorithm(_psgd(federated={"evaluate": "every-round"}))
    rows = [algo.run_round() for _ in range(4)]
    assert all(math.isfinite(r["global_accuracy"]) for r in rows)
    for t, row in enumerate(rows, 1):
        pld = next(r for r in algo.plan.results(t) if r.method == "pld")
        assert row["epsilon_method"] == "pld" and row["epsilon"] == pld.epsilon
    classes = algo.output_classes()
    assert classes["global_accuracy"][0] and classes["model_norm"][0]
    assert not classes["train_loss"][0] and not classes["clipped_fraction"][0]
    with pytest.raises(ConfigError, match="no all-iterates accountant"):
        build_algorithm(_psgd(federated={"evaluate": "every-round"},
                              privacy={"accountants": ["contraction-sharpened"]}))


def test_headline_is_the_smallest_valid_bound_for_the_released_model():
    """Independent rounds of the demo, 5 rounds: the contraction bound is 26.32, the
    all-iterates PLD bound 3.926 also bounds the released model, so it is the headline."""
    config = config_from_dict({**_demo("demo-projected-sgd.yaml"),
                               "federated": {**_demo("demo-projected-sgd.yaml")["federated"],
                                             "schedule": "independent"}})
    algo = build_algorithm(config)
    results = algo.plan.results(5)
    by_method = {r.method: r for r in results}
    assert by_method["contraction"].epsilon == pytest.approx(26.3247, abs=1e-4)
    assert by_method["pld"].epsilon == pytest.approx(3.92561, abs=1e-5)
    metrics = privacy_metrics(algo.plan, results)
    assert metrics["epsilon_method"] == "pld"
    assert metrics["epsilon"] == by_method["pld"].epsilon
    assert metrics["epsilon"] == min(r.epsilon for r in results if r.kind == "bound")


def _demo(name: str) -> dict:
    import yaml

    return yaml.safe_load((CONFIGS / name).read_text())


# ------------------------------------------------------------------ convexity claims checked
def test_logistic_regression_constants():
    assert logreg_constants(1.0) == (1.0, 2.0)
    beta, lip = logreg_constants(3.0)
    assert beta == 5.0 and lip == pytest.approx(math.sqrt(20.0))


@pytest.mark.parametrize(("federated", "message"), [
    ({"smoothness": 0.1, "lr": 20.0}, "smoothness = 0.1 is out of range"),
    ({"smoothness": 0.5, "lr": 2.0}, "smoothness = 0.5 is out of range"),
    ({"lipschitz": 1.5}, "lipschitz = 1.5 is out of range"),
    ({"input_bound": 2.0}, r"smoothness = 1 is out of range.*B = 2"),
])
def test_convex_claims_below_the_models_constants_are_refused(federated, message):
    settings = {"convex": True, "smoothness": 1.0, "lipschitz": 2.0, **federated}
    with pytest.raises(ConfigError, match=message):
        build_algorithm(_psgd(federated=settings))


def test_without_input_bound_the_datas_largest_norm_is_checked():
    """Digits pixels go up to 16: norms far above 1, so a 1-smooth claim is refused."""
    with pytest.raises(ConfigError, match="largest training input"):
        build_algorithm(_psgd(federated={"convex": True, "smoothness": 1.0, "lipschitz": 2.0,
                                         "input_bound": None}))


def test_valid_convex_claims_still_pass():
    algo = build_algorithm(_psgd(federated={"convex": True, "smoothness": 1.0,
                                            "lipschitz": 2.0, "lr": 2.0}))
    assert algo.plan.convex


# ------------------------------------------------------------------ every output classified
DEMOS = ["demo.yaml", "demo-dp-fedavg.yaml", "demo-insdp-fedsgd.yaml", "demo-insdp-fedavg.yaml",
         "demo-dp-dsgd.yaml", "demo-projected-sgd.yaml", "demo-dp-ftrl.yaml",
         "demo-bandmf.yaml"]

#: keys that must be outside the guarantee, per demo
MUST_BE_UNCOVERED = {
    "demo-dp-fedavg.yaml": {"cohort_size", "update_norm", "train_loss", "clipped_fraction"},
    "demo-dp-dsgd.yaml": {"participants", "records", "train_loss", "clipped_fraction"},
    "demo.yaml": {"train_loss", "clipped_fraction"},
    "demo-insdp-fedsgd.yaml": {"train_loss", "clipped_fraction"},
    "demo-insdp-fedavg.yaml": {"train_loss", "clipped_fraction"},
    "demo-projected-sgd.yaml": set(),
    "demo-dp-ftrl.yaml": {"update_norm", "train_loss", "clipped_fraction"},
    "demo-bandmf.yaml": {"update_norm", "train_loss", "clipped_fraction"},
}


@pytest.mark.parametrize("name", DEMOS)
def test_every_metrics_key_of_every_algorithm_is_classified(name):
    raw = _demo(name)
    raw["federated"]["rounds"] = 1
    algo = build_algorithm(config_from_dict(raw))
    row = algo.run_round()
    table = {**GENERIC_METRICS, **algo.output_classes()}
    assert set(row) <= set(table), f"unclassified: {sorted(set(row) - set(table))}"
    assert all(table[k] != UNCLASSIFIED for k in row)
    uncovered = {k for k in row if not table[k][0]}
    assert MUST_BE_UNCOVERED[name] | {"seconds"} <= uncovered
    for key in ("round", "epsilon", "privacy"):
        assert table[key][0]


def test_run_lists_every_output_in_privacy_json_and_report(tmp_path):
    raw = _demo("demo-dp-fedavg.yaml")
    raw["federated"]["rounds"] = 2
    run_dir = tmp_path / "run"
    result = Experiment.create(config_from_dict(raw), run_dir).run()
    outputs = _outputs(run_dir)
    rows = RunDirectory(run_dir).read_metrics()
    assert {k for row in rows for k in row} <= set(outputs)
    for name in ("config.yaml", "metrics.jsonl", "privacy.json", "summary.json", "report.md",
                 "accuracy.png", "privacy.png", "model.pt", "checkpoints/", "run.json"):
        assert name in outputs
    assert outputs["cohort_size"]["covered"] is False
    assert outputs["metrics.jsonl"]["covered"] is False  # it holds cohort_size, train_loss ...
    assert "cohort_size" in outputs["metrics.jsonl"]["reason"]
    # seeded: every file that names the seed (the card's randomness row does) is uncovered
    for name in ("config.yaml", "privacy.json", "summary.json", "report.md"):
        assert outputs[name]["covered"] is False and "seed" in outputs[name]["reason"]
    assert outputs["privacy.png"]["covered"] is True
    assert result.summary["outputs"] == list(outputs.values())
    report = (run_dir / "report.md").read_text()
    assert "## What the guarantee covers" in report
    assert "| `cohort_size` | metric | **no** |" in report


# ------------------------------------------------------------------ run.outputs: guarantee-only
def _secure_fedavg(**run):
    raw = _demo("demo-dp-fedavg.yaml")
    raw["federated"]["rounds"] = 3
    raw["privacy"]["secure"] = True
    raw["run"] = {**raw.get("run", {}), "outputs": "guarantee-only", **run}
    return config_from_dict(raw)


def test_guarantee_only_writes_only_covered_outputs_to_the_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    private = tmp_path / "run.private"
    first = Experiment.create(_secure_fedavg(max_rounds=2), run_dir)
    covered = first.covered_metrics()
    first.run()
    Experiment.resume(run_dir, ["run.max_rounds=null"]).run()
    rows = RunDirectory(run_dir).read_metrics()
    assert [r["round"] for r in rows] == [1, 2, 3]
    assert all(set(r) <= covered for r in rows)
    hidden = [json.loads(line) for line in (private / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in hidden] == [1, 2, 3]
    assert {"cohort_size", "train_loss", "update_norm", "seconds"} <= set(hidden[0])
    assert not (run_dir / "checkpoints").exists()
    assert (private / "checkpoints").is_dir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert not {"wall_seconds", "training_seconds", "accounting_seconds"} & set(summary)
    outputs = _outputs(run_dir)
    in_run_dir = [o for o in outputs.values() if o["kind"] == "file"
                  and not o["name"].startswith("../")]
    assert all(o["covered"] for o in in_run_dir), [o for o in in_run_dir if not o["covered"]]
    assert outputs["../run.private/checkpoints/"]["covered"] is False
    assert check_run_privacy(run_dir).ok


def test_guarantee_only_refuses_seeded_runs_and_a_change_on_resume(tmp_path):
    raw = _demo("demo-dp-fedavg.yaml")
    raw["run"] = {"outputs": "guarantee-only"}
    with pytest.raises(ConfigError, match="needs privacy.secure = true"):
        Experiment.create(config_from_dict(raw), tmp_path / "seeded")
    assert not (tmp_path / "seeded").exists()
    Experiment.create(_secure_fedavg(max_rounds=1), tmp_path / "run").run()
    with pytest.raises(ConfigError, match="run.outputs is not allowed with --resume"):
        Experiment.resume(tmp_path / "run", ["run.outputs=all"])


def test_dp_fedavg_offers_an_accounted_private_clipped_fraction():
    """Adaptive clipping with eta_C = 0: the clip norm stays fixed, the noised unclipped
    fraction is reported (covered) and accounted like adaptive clipping's."""
    raw = _demo("demo-dp-fedavg.yaml")
    raw["federated"].update(rounds=2, adaptive_clipping=True, clip_learning_rate=0.0)
    algo = build_algorithm(config_from_dict(raw))
    rows = [algo.run_round() for _ in range(2)]
    assert [r["clip_norm"] for r in rows] == [rows[0]["clip_norm"]] * 2
    assert all(math.isfinite(r["unclipped_estimate"]) for r in rows)
    assert algo.output_classes()["unclipped_estimate"][0]
    moving = copy.deepcopy(raw)
    moving["federated"]["clip_learning_rate"] = 0.2
    fixed = copy.deepcopy(raw)
    fixed["federated"]["adaptive_clipping"] = False
    eps = {name: {r.method: r.epsilon for r in build_algorithm(config_from_dict(c)).privacy(2)}
           for name, c in (("zero", raw), ("moving", moving), ("none", fixed))}
    # z is the effective multiplier of update and count (Andrew et al. 2021 Theorem 1): the
    # same epsilon, paid for with more noise on the update (z_u = 1.73205 > z = 1.5)
    assert eps["zero"] == eps["moving"] == eps["none"]
    z = raw["privacy"]["noise_multiplier"]
    assert rows[0]["noise_std"] / rows[0]["clip_norm"] == pytest.approx(
        (z ** -2 - (2 * algo.plan.adaptive.count_noise) ** -2) ** -0.5)
    assert rows[0]["noise_std"] / rows[0]["clip_norm"] > z
