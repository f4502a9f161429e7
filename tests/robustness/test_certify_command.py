"""privfl certify CONFIG: M models trained together, certified accuracy, attack-inefficacy bounds
against the measured attack, and the files written."""

from __future__ import annotations

import json
import zipfile

import pytest
import yaml
from typer.testing import CliRunner

from privfl.cli.main import app

TINY = {
    "name": "certify-tiny",
    "seed": 0,
    "data": {"dataset": "mnist-5k", "classes": [0, 1], "partition": "iid", "clients": 12,
             "train_size": 20, "test_size": 5},
    "model": {"name": "logreg"},
    "training": {"local_steps": 3, "batch_size": 10, "optimizer": "sgd", "lr": 0.2},
    "privacy": {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-3,
                "accountants": ["rdp"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 2, "client_sampling": "fixed-size",
                  "cohort_size": 6},
    "run": {"threads": 1},
}


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def test_certify_writes_the_certification_and_checks_the_bounds(tiny, tmp_path):
    out = tmp_path / "cert"
    result = CliRunner().invoke(app, ["certify", str(tiny), "--models", "4", "--attack",
                                      "backdoor", "--attackers", "2", "--out", str(out),
                                      "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["models"] == 4 and data["unit"] == "user" and data["algorithm"] == "dp-fedavg"
    assert data["privacy"]["certification_epsilon"] == pytest.approx(
        4 * data["privacy"]["epsilon"])
    assert [row["k"] for row in data["measured"]] == [1, 2]
    for row in data["measured"]:
        assert row["inside"] == (row["bound_lower"] <= row["success"] <= row["bound_upper"])
        assert 0.0 <= row["success_low"] <= row["success"] <= row["success_high"] <= 1.0
    ineff = data["inefficacy"]
    assert all(lo <= hi for lo, hi in zip(ineff["lower"], ineff["upper"], strict=True))
    acc = data["certified_accuracy"]
    assert all(a >= b for a, b in zip(acc["certified_accuracy"], acc["certified_accuracy"][1:],
                                      strict=False))  # non-increasing in k
    assert {p.name for p in out.iterdir()} == {"certify.json", "certified_accuracy.png",
                                                "attack_inefficacy.png", "report.md",
                                                "report.html", "replicas"}
    # every file is classified; with measured attacks the reports are outside the guarantee
    outputs = json.loads((out / "certify.json").read_text())["outputs"]
    written = {p.name + ("/" if p.is_dir() else "") for p in out.iterdir()}
    assert {o["name"] for o in outputs} == written
    covered = {o["name"]: o["covered"] for o in outputs}
    assert covered == {"certify.json": False, "report.md": False, "report.html": False,
                       "certified_accuracy.png": True, "attack_inefficacy.png": False,
                       "replicas/": False}
    html = (out / "report.html").read_text()
    for fragment in (data["privacy_lines"][0], 'id="plot-certified"', 'id="plot-inefficacy"',
                     'id="outputs"', "measured attack success", "attacked replicas"):
        assert fragment in html, fragment
    assert "https://" not in html.split("<script", 1)[0]  # nothing loaded from the network
    assert {p.name for p in (out / "replicas").iterdir()} == {"clean", "attack-1", "attack-2"}
    report = (out / "report.md").read_text()
    assert "## Certified accuracy" in report and "## Attack inefficacy (Theorem 6)" in report
    assert json.loads((out / "certify.json").read_text())["measured"] == data["measured"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--models", "0"], "models = 0"),
    (["--models", str(10**12)], f"models = {10**12} is out of range: must be <= "),
    (["--attack", "backdoor", "--attackers", "13"], "attackers = 13"),
    (["--attackers", "2"], "attackers = 2 is not allowed without --attack"),
    (["--confidence", "1.5"], "confidence"),
    (["--set", "privacy.enabled=false"], "privacy.enabled = false"),
    (["--set", "federated={algorithm: prifedsync}"], "prifedsync"),
    (["--workers", "2"], "workers = 2 is not allowed with backend 'local'"),
    (["--backend", "spark"], "backend = 'spark' is not allowed: must be one of local, ray"),
    (["--models", "2", "--set", "training.lr=3e38"], "training diverged: 2 of the clean models"),
])
def test_bad_certify_inputs_are_one_line(tiny, tmp_path, args, fragment):
    result = CliRunner().invoke(app, ["certify", str(tiny), "--out", str(tmp_path / "o"),
                                      *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()
             and not line.startswith("  ")]
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_radius_still_routes_to_its_command():
    result = CliRunner().invoke(app, ["certify", "radius", "--top", "0.95", "--runner-up",
                                      "0.05", "--epsilon", "0.6298", "--delta", "0.0029",
                                      "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["certified_k"] == pytest.approx(2.289528, abs=1e-6)


def _instance_config(tmp_path):
    """TINY as InsDP-FedAvg with an instance-level backdoor: k poisoned records in one client
    of 20 records (12 clients)."""
    raw = {**TINY, "federated": {"algorithm": "insdp-fedavg", "rounds": 1,
                                 "clients_per_round": 4},
           "attack": {"kind": "backdoor", "level": "instance"}}
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(("instance", "attackers", "fragment"), [
    (False, 13, "attackers = 13 is out of range: must be an integer in [1, 12] "
                "(attack.level = 'user': k malicious clients of data.clients = 12)"),
    (True, 21, "attackers = 21 is out of range: must be an integer in [1, 20] "
               "(attack.level = 'instance': k poisoned records in one client, which has 20 "
               "records)"),
])
def test_attackers_are_limited_by_the_attack_level(tiny, tmp_path, instance, attackers,
                                                   fragment):
    path = _instance_config(tmp_path) if instance else tiny
    result = CliRunner().invoke(app, ["certify", str(path), "--attack", "backdoor",
                                      "--attackers", str(attackers), "--out",
                                      str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr, result.stderr


def test_instance_level_allows_more_attackers_than_clients(tmp_path, monkeypatch):
    """13 poisoned records in one client of 20 (12 clients): accepted, training starts."""
    from privfl.robustness import montecarlo

    def reached(*args, **kwargs):
        raise ValueError("training reached")

    monkeypatch.setattr(montecarlo, "train_replicas", reached)
    result = CliRunner().invoke(app, ["certify", str(_instance_config(tmp_path)), "--attack",
                                      "backdoor", "--attackers", "13", "--out",
                                      str(tmp_path / "o")])
    assert result.exit_code == 2 and "training reached" in result.stderr, result.stderr


def _certify_json(args):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow  # long (5-15 s on 2 cores): `make test-slow`
def test_recompute_certifies_the_saved_models_again_without_training(tiny, tmp_path):
    """Same method and confidence: the same certification; another confidence or method:
    what certifying those saved predictions gives (lower confidence certifies at least as
    much); a damaged replica file or a directory without certify.json is refused."""
    out = tmp_path / "cert"
    first = _certify_json(["certify", str(tiny), "--models", "6", "--attack", "backdoor",
                           "--attackers", "2", "--out", str(out), "--json"])
    again = _certify_json(["certify", "recompute", str(out), "--out", str(tmp_path / "again"),
                           "--json"])
    for key in ("certified_accuracy", "certificate", "inefficacy", "measured", "privacy",
                "clean_accuracy", "clean_attack_success", "attack", "models", "unit"):
        assert again[key] == first[key], key
    assert again["replicas"] == str(out / "replicas")
    loose = _certify_json(["certify", "recompute", str(out), "--confidence", "0.5", "--out",
                           str(tmp_path / "loose"), "--json"])
    assert loose["confidence"] == 0.5
    assert all(a >= b for a, b in zip(loose["certified_accuracy"]["certified_accuracy"],
                                      first["certified_accuracy"]["certified_accuracy"],
                                      strict=False))
    estimate = _certify_json(["certify", "recompute", str(out), "--method", "estimate",
                              "--out", str(tmp_path / "estimate"), "--json"])
    assert estimate["certified_accuracy"]["kind"] == "estimate"
    # a damaged file: one byte of the clean set's test probabilities changed (inside the
    # member's compressed data, not in a header field that zipfile does not read)
    path = out / "replicas" / "clean" / "replicas.npz"
    with zipfile.ZipFile(path) as archive:
        member = archive.getinfo("probabilities-test.npy")
    start = member.header_offset + 30 + len(member.filename) + len(member.extra)
    raw = bytearray(path.read_bytes())
    raw[start + member.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    result = CliRunner().invoke(app, ["certify", "recompute", str(out), "--out",
                                      str(tmp_path / "bad")])
    assert result.exit_code == 2 and "replicas.npz" in result.stderr, result.output
    result = CliRunner().invoke(app, ["certify", "recompute", str(tmp_path), "--out",
                                      str(tmp_path / "none")])
    assert result.exit_code == 2 and "holds no certify.json" in result.stderr, result.output


def _no_training(monkeypatch):
    from privfl.robustness import montecarlo

    def reached(*args, **kwargs):
        raise ValueError("training reached")

    monkeypatch.setattr(montecarlo, "train_replicas", reached)


def test_label_flip_limit_counts_source_class_records_before_training(tmp_path, monkeypatch):
    """A label flip poisons source-class records only: 20 records per client, but at most
    `limit` of class 1 in any client. The issue's --attackers 60 failed at k = 46 after 3
    minutes of training; now it fails before training, naming the limit."""
    from privfl.algorithms.builders import build_dataset
    from privfl.config import load_config

    path = _instance_config(tmp_path)
    data = build_dataset(load_config(path))
    limit = max(int((data.train.y[idx] == 1).sum()) for idx in data.train_indices)
    assert limit < 20
    _no_training(monkeypatch)
    result = CliRunner().invoke(app, ["certify", str(path), "--attack", "label-flip",
                                      "--attackers", str(limit + 1), "--out",
                                      str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "training reached" not in result.stderr
    assert (f"attackers = {limit + 1} is out of range: must be an integer in [1, {limit}] "
            "(attack.level = 'instance': k poisoned records in one client, which has at most "
            f"{limit} records the label-flip attack can poison (source-class records))"
            in result.stderr), result.stderr
    result = CliRunner().invoke(app, ["certify", str(path), "--attack", "label-flip",
                                      "--attackers", str(limit), "--out",
                                      str(tmp_path / "o2")])
    assert "training reached" in result.stderr, result.stderr


@pytest.mark.parametrize("clipping", ["flat-median", "per-layer-median"])
def test_median_clipping_is_refused_before_training(tiny, tmp_path, monkeypatch, clipping):
    _no_training(monkeypatch)
    result = CliRunner().invoke(app, ["certify", str(tiny), "--set",
                                      f"federated.clipping={clipping}", "--out",
                                      str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "training reached" not in result.stderr and "privacy.enabled" not in result.stderr
    assert f"federated.clipping = {clipping!r} is not allowed for a certificate" in \
        result.stderr, result.stderr


def test_add_remove_adversary_is_refused_for_fixed_size_cohorts(tiny, tmp_path, monkeypatch):
    """TINY's fixed-size cohorts are accounted under replace-one neighbours, which do not cover
    adding or removing a client: refused before training."""
    _no_training(monkeypatch)
    result = CliRunner().invoke(app, ["certify", str(tiny), "--adversary", "add-remove",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "adversary = 'add-remove' is not allowed with neighbouring = 'replace-one'" in \
        result.stderr, result.stderr
