"""`privfl run` from the command line: errors, --set, --json, the run directory, --resume."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from typer.testing import CliRunner

from privfl.cli.main import app

runner = CliRunner()

TINY = {
    "name": "cli-tiny",
    "seed": 11,
    "data": {"dataset": "synthetic", "synthetic_examples": 200, "test_fraction": 0.25,
             "partition": "iid", "clients": 3, "test_size": 10},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 10, "lr": 0.05},
    "privacy": {"sigma": 0.9, "delta": 1e-5},
    "federated": {"rounds": 2, "client_rate": 1.0},
    "run": {"threads": 1},
}


@pytest.fixture
def tiny_yaml(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def _run(*args):
    return runner.invoke(app, ["run", *args])


def _one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("privfl: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--set", "training.lrr=0.1"], ["training.lrr is not a known key", "local_steps"]),
        (["--set", "federated.helper=mean"], ["federated.helper = 'mean' is not allowed",
                                               "'interpolation' or 'identity'"]),
        (["--set", "federated.client_rate=2"], ["federated.client_rate = 2 is out of range"]),
        (["--set", "noequals"], ["--set 'noequals' is not valid"]),
        (["--set", "model.kwargs.depth=5"], ["model.kwargs", "depth = 5 is not allowed"]),
    ],
)
def test_bad_config_exits_2_with_one_line(tmp_path, tiny_yaml, args, fragments):
    result = _run(str(tiny_yaml), "--out", str(tmp_path / "out"), *args)
    _one_line_error(result, *fragments)
    assert not (tmp_path / "out").exists()  # nothing is created for a bad config


def test_bad_yaml_and_missing_file_exit_2(tmp_path):
    _one_line_error(_run(str(tmp_path / "nope.yaml")), "is not a file")
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: {clients: 3\n")
    _one_line_error(_run(str(bad)), "is not valid YAML")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("privacy: {sigma: 1.0, epsilon: 3}\n")
    _one_line_error(_run(str(unknown)), "privacy.epsilon is not a known key")


@pytest.mark.parametrize(("sets", "fragments"), [
    (["data.dataset=cifar10", "model.name=zheng2021-cifar-cnn"], ["CIFAR-10 is not in"]),
    (["data.dataset=mnist"], ["MNIST is not in", "data.dataset: mnist-5k",
                              "privfl run: --set data.dataset=mnist-5k"]),
])
def test_missing_dataset_exits_2(tmp_path, tiny_yaml, monkeypatch, sets, fragments):
    monkeypatch.setenv("PRIVFL_DATA", str(tmp_path / "empty-cache"))
    result = _run(str(tiny_yaml), "--out", str(tmp_path / "out"),
                  *(part for item in sets for part in ("--set", item)))
    # said in the command line's and the configuration's words, not the Python API's
    _one_line_error(result, *fragments, "set data.download: true",
                    "privfl run: --set data.download=true")
    for python in ("download=True", "load_mnist_5k()", "download_cifar10()", "root="):
        assert python not in result.stderr


def test_json_summary_and_mu_equal_account_fedfdp(tmp_path, tiny_yaml):
    out = tmp_path / "run"
    result = _run(str(tiny_yaml), "--out", str(out), "--json", "--no-progress",
                  "--set", "federated.rounds=3")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)  # stdout holds only the JSON (cards went to stderr)
    assert summary["rounds_completed"] == 3 and summary["stop_reason"] == "rounds"
    # the accountants' time of the timed loop: part of it, and not zero (three rounds accounted)
    assert 0.0 < summary["accounting_seconds"] <= summary["wall_seconds"]
    assert "privacy card" in result.stderr and "bound" in result.stderr
    assert "estimate" in result.stderr
    privacy = summary["privacy"]
    assert {(r["method"], r["kind"], r["scope"]) for r in privacy} == {
        ("gdp-clt", "estimate", "weak"), ("gdp-clt", "estimate", "strong"),
        ("pld", "bound", "weak"), ("pld", "bound", "strong")}
    for entry in privacy:
        for key in ("epsilon", "delta", "unit", "neighbouring", "sampling", "release", "steps"):
            assert key in entry

    # the same settings through `privfl account fedfdp`: 3 clients of 150 records
    account = runner.invoke(app, [
        "account", "fedfdp", "--records", "50", "--batch-size", "10", "--local-steps", "2",
        "--rounds", "3", "--paper-sigma", "0.9", "--clients", "3", "--client-rate", "1.0",
        "--delta", "1e-5", "--json"])
    assert account.exit_code == 0, account.output
    expected = {(r["method"], r["scope"]): r for r in json.loads(account.stdout)["results"]}
    for entry in privacy:
        reference = expected[(entry["method"], entry["scope"])]
        assert entry["epsilon"] == pytest.approx(reference["epsilon"], rel=1e-12)
        assert entry.get("mu", 0.0) == pytest.approx(reference.get("mu", 0.0), rel=1e-12)
        assert entry["steps"] == reference["steps"]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["mu"] == expected[("gdp-clt", "weak")]["mu"]
    # the privacy report on disk is the same list
    assert json.loads((out / "privacy.json").read_text())["results"] == privacy


def test_set_overrides_reach_the_resolved_config(tmp_path, tiny_yaml):
    out = tmp_path / "run"
    result = _run(str(tiny_yaml), "--out", str(out), "--no-progress", "--set", "seed=5",
                  "--set", "federated.rounds=1", "--set", "federated.helper=identity")
    assert result.exit_code == 0, result.output
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["seed"] == 5 and saved["federated"]["rounds"] == 1
    assert saved["federated"]["helper"] == "identity"
    assert saved["training"]["momentum"] == 0.9  # defaults are filled in
    for name in ("metrics.jsonl", "privacy.json", "summary.json", "report.md", "accuracy.png",
                 "privacy.png"):
        assert (out / name).is_file(), name
    assert (out / "checkpoints" / "round-000001.pt").is_file()


@pytest.mark.slow  # long (5-15 s on 2 cores): `make test-slow`
def test_resume_from_the_command_line_equals_uninterrupted(tmp_path, tiny_yaml):
    fast = ["--no-progress", "--set", "privacy.accountants=[gdp-clt]",
            "--set", "federated.client_rate=0.6"]
    assert _run(str(tiny_yaml), "--out", str(tmp_path / "full"), *fast).exit_code == 0
    part = _run(str(tiny_yaml), "--out", str(tmp_path / "part"), *fast,
                "--set", "run.max_rounds=1")
    assert part.exit_code == 0 and "--resume" in part.output
    _one_line_error(_run(str(tiny_yaml), "--resume", str(tmp_path / "part")),
                    "is not allowed with --resume")
    _one_line_error(_run("--resume", str(tmp_path / "part"), "--set", "seed=1"),
                    "--set seed is not allowed with --resume")
    resumed = _run("--resume", str(tmp_path / "part"), "--no-progress", "--json",
                   "--set", "run.max_rounds=null")
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads(resumed.stdout)
    assert summary["resumed_from_round"] == 1 and summary["rounds_completed"] == 2
    a = torch.load(tmp_path / "full" / "checkpoints" / "round-000002.pt", weights_only=True)
    b = torch.load(tmp_path / "part" / "checkpoints" / "round-000002.pt", weights_only=True)
    assert torch.equal(a["algorithm"]["local"], b["algorithm"]["local"])
    assert torch.equal(a["algorithm"]["global_model"], b["algorithm"]["global_model"])


def test_card_says_which_randomness_is_secure(tmp_path, tiny_yaml):
    """A seeded run's card says its sampling and noise follow from the config's seed; a secure
    run's (privacy.secure, or its deprecated alias privacy.secure_noise) says they come from
    os.urandom; both keys disagreeing is a one-line error."""
    fast = [str(tiny_yaml), "--no-progress", "--set", "federated.rounds=1",
            "--set", "privacy.accountants=[gdp-clt]"]
    seeded = _run(*fast, "--out", str(tmp_path / "seeded"))
    assert seeded.exit_code == 0, seeded.output
    text = " ".join(seeded.output.split())
    assert ("seeded: the noise, the local batches and the cohorts (client sampling) are "
            "reproducible from seed = 11 (the seed in config.yaml) and therefore known to anyone "
            "holding the config; the guarantee holds only against an adversary who does not "
            "know the seed") in text
    for key in ("privacy.secure", "privacy.secure_noise"):
        out = tmp_path / key
        secure = _run(*fast, "--out", str(out), "--set", f"{key}=true")
        assert secure.exit_code == 0, secure.output
        text = " ".join(secure.output.split())
        assert ("secure: the noise, the local batches and the cohorts (client sampling) are "
                "drawn from os.urandom") in text
        saved = yaml.safe_load((out / "config.yaml").read_text())
        assert saved["privacy"]["secure"] is True and "secure_noise" not in saved["privacy"]
        assert "| randomness | secure: " in (out / "report.md").read_text()
    _one_line_error(_run(*fast, "--out", str(tmp_path / "both"), "--set", "privacy.secure=true",
                         "--set", "privacy.secure_noise=false"),
                    "privacy.secure = true and privacy.secure_noise = false disagree")


def test_existing_out_directory_is_refused(tmp_path, tiny_yaml):
    args = [str(tiny_yaml), "--out", str(tmp_path / "run"), "--no-progress",
            "--set", "federated.rounds=1", "--set", "privacy.accountants=[gdp-clt]"]
    assert _run(*args).exit_code == 0
    _one_line_error(_run(*args), "already holds a run",
                    f"continue it with privfl run --resume {tmp_path / 'run'} or choose "
                    "another --out")


@pytest.mark.slow  # 10-20 s on 2 cores: `make test-slow` (keeps `make test` under 10 min)
def test_demo_end_to_end(tmp_path):
    """The built-in demo: personalised private models beat the private global model (~7 s)."""
    result = _run("--out", str(tmp_path / "demo"), "--json", "--no-progress")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    final = summary["final"]
    assert final["personalised_accuracy"] > final["global_accuracy"] + 0.2
    assert final["personalised_accuracy"] > 0.75


def test_check_privacy_agrees_and_catches_a_tampered_round(tmp_path, tiny_yaml):
    """`privfl check-privacy`: every round equals a fresh computation from config.yaml; a
    changed mu (Theorem 2's CLT estimate) in metrics.jsonl is reported (exit 1)."""
    out = tmp_path / "out"
    assert _run(str(tiny_yaml), "--out", str(out)).exit_code == 0
    ok = runner.invoke(app, ["check-privacy", str(out)])
    assert ok.exit_code == 0, ok.output
    assert "2 rounds checked" in ok.stdout and "all rounds agree" in ok.stdout
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    entry = next(e for e in rows[1]["privacy"] if e["method"] == "gdp-clt"
                 and e["scope"] == "weak")
    entry["mu"] *= 1 + 1e-6
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    bad = runner.invoke(app, ["check-privacy", str(out), "--json"])
    assert bad.exit_code == 1
    payload = json.loads(bad.stdout)
    assert [row["ok"] for row in payload["rows"]] == [True, False]
    (problem,) = payload["rows"][1]["problems"]
    assert problem.startswith(f"gdp-clt/estimate/weak mu: logged {entry['mu']!r}, fresh ")
    missing = runner.invoke(app, ["check-privacy", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "no config.yaml" in missing.output


def test_check_privacy_reads_non_finite_numbers_as_logged(tmp_path, tiny_yaml):
    """A CLT mu beyond the float range is logged as "inf" (JSON has no infinity): check-privacy
    compares it as infinity, not as a mismatch."""
    out = tmp_path / "out"
    result = _run(str(tiny_yaml), "--out", str(out), "--set", "privacy.sigma=0.02",
                  "--set", "privacy.accountants=[gdp-clt, rdp]")
    assert result.exit_code == 0, result.output
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    clt = next(e for e in row["privacy"] if e["method"] == "gdp-clt" and e["scope"] == "weak")
    assert clt["mu"] == "inf" and clt["epsilon"] == "inf"
    check = runner.invoke(app, ["check-privacy", str(out)])
    assert check.exit_code == 0, check.output
    assert "all rounds agree" in check.stdout


def test_run_threads_do_not_change_a_single_bit(tmp_path, tiny_yaml):
    """run.threads (client workers, each on one torch thread) is an execution setting: a CNN run
    with 1 and with 2 gives identical metrics and models (two intra-op threads used to change
    the weights in the 8th digit)."""
    cnn = ["--no-progress", "--set", "model.name=zheng2021-mnist-cnn", "--set",
           "privacy.accountants=[gdp-clt]", "--set", "training.batch_size=5"]
    rows, models = [], []
    for threads in (1, 2):
        out = tmp_path / f"t{threads}"
        result = _run(str(tiny_yaml), "--out", str(out), *cnn, "--set", f"run.threads={threads}")
        assert result.exit_code == 0, result.output
        lines = (out / "metrics.jsonl").read_text().splitlines()
        rows.append([{k: v for k, v in json.loads(line).items() if k != "seconds"}
                     for line in lines])
        models.append(torch.load(out / "checkpoints" / "round-000002.pt", weights_only=True))
    assert rows[0] == rows[1]
    for key in ("local", "global_model"):
        assert torch.equal(models[0]["algorithm"][key], models[1]["algorithm"][key])


def test_one_log_line_per_round_when_output_is_not_a_terminal(tmp_path, tiny_yaml):
    result = _run(str(tiny_yaml), "--out", str(tmp_path / "run"), "--set",
                  "privacy.accountants=[gdp-clt]")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("round ")]
    assert [line.split(":")[0] for line in lines] == ["round 1/2", "round 2/2"]
    assert "round 1/2" not in _run(
        str(tiny_yaml), "--out", str(tmp_path / "quiet"), "--no-progress", "--set",
        "privacy.accountants=[gdp-clt]").output


def test_a_nan_loss_stops_the_run_with_the_round_and_the_cause(tmp_path, tiny_yaml):
    result = _run(str(tiny_yaml), "--out", str(tmp_path / "run"), "--json", "--set",
                  "privacy.enabled=false", "--set", "training.lr=3e38", "--set",
                  "training.optimizer=sgd", "--set", "model.name=mlp", "--set",
                  "federated.rounds=3")
    assert result.exit_code == 3, result.output  # cli.common.EXIT_DIVERGED
    summary = json.loads(result.stdout)
    assert summary["stop_reason"] == "diverged" and summary["warnings"] == []
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("privfl: round 1: the training loss is ")
    assert "training.lr = 3e+38" in line and "no finite checkpoint is kept" in line
    assert not (tmp_path / "run" / "model.pt").exists()


def test_tensorboard_event_files_hold_the_logged_metrics(tmp_path, tiny_yaml):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    result = _run(str(tiny_yaml), "--out", str(out), "--no-progress", "--set",
                  "run.tensorboard=true", "--set", "privacy.accountants=[gdp-clt]")
    assert result.exit_code == 0, result.output
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    for tag, key in (("personalised_accuracy", "personalised_accuracy"),
                     ("train_loss", "train_loss")):
        logged = [(e.step, e.value) for e in events.Scalars(tag)]
        assert logged == [(row["round"], pytest.approx(row[key], rel=1e-6)) for row in rows]
    assert any(tag.startswith("privacy/gdp-clt-estimate") for tag in events.Tags()["scalars"])
