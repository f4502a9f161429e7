"""The command line under bad inputs and faults: at least 40 cases, each must give a non-zero
exit, exactly one line on stderr (``privfl: error: ...``, naming what to change), no traceback,
and leave no run directory that a later ``--resume`` would trust.

Cases run in-process through ``privfl.cli.main.main`` (the console-script entry point, so
usage errors are covered too); a few that need a separate process (a kill) use a subprocess.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from privfl.cli.main import main

TINY = {
    "name": "bad-inputs",
    "seed": 3,
    "data": {"dataset": "synthetic", "synthetic_examples": 120, "test_fraction": 0.25,
             "partition": "iid", "clients": 3, "test_size": 5},
    "model": {"name": "logreg"},
    "training": {"local_steps": 1, "batch_size": 5},
    "privacy": {"noise_multiplier": 1.0, "accountants": ["gdp-clt"]},
    "federated": {"rounds": 3, "client_rate": 1.0},
    "run": {"threads": 1},
}


def _invoke(capsys, args) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    return exited.value.code, capsys.readouterr().err


def _assert_one_line(code: int, err: str, fragment: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code not in (0, None), err
    assert len(lines) == 1, err
    assert lines[0].startswith("privfl: error: "), lines[0]
    assert "Traceback" not in err
    assert fragment in lines[0], lines[0]


def _yaml(tmp_path, name, text: str | bytes) -> Path:
    path = tmp_path / f"{name}.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _tiny(tmp_path, **sections) -> Path:
    raw = json.loads(json.dumps(TINY))
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return _yaml(tmp_path, "tiny", yaml.safe_dump(raw))


def _run_ok(tmp_path, name, *extra) -> Path:
    out = tmp_path / name
    with pytest.raises(SystemExit) as exited:
        main(["run", str(_tiny(tmp_path)), "--out", str(out), "--no-progress", *extra])
    assert exited.value.code in (0, None)
    return out


def _idx_root(tmp_path, name, header: bytes, copies: int) -> Path:
    """A data.root whose mnist/ folder holds gzip'ed IDX files (not the published names)."""
    folder = tmp_path / name / "mnist"
    folder.mkdir(parents=True)
    zeros = gzip.compress(bytes(1 << 22), 9, mtime=0)
    for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        with open(folder / stem, "wb") as out:
            out.write(gzip.compress(header, mtime=0))
            for _ in range(copies):
                out.write(zeros)
    return folder.parent


LAUGHS = "\n".join(["model:", "  name: mlp", "  kwargs:", "    l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1]"]
                   + [f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 8) + "]"
                      for i in range(1, 10)]) + "\n"

# (id, config text or None for the tiny config, extra args, fragment of the one-line error)
RUN_CASES = [
    ("duplicate-key", "seed: 1\nname: a\nseed: 2\n", [], "seed is given twice"),
    ("duplicate-nested-key", "training:\n  lr: 0.1\n  lr: 0.2\n", [], "training.lr is given twice"),
    ("billion-laughs", LAUGHS, [], "anchor &l0 is not allowed"),
    ("alias", "stop: *x\n", [], "alias *x is not allowed"),
    ("merge-key", "training:\n  <<: {lr: 0.1}\n", [], "merge key"),
    ("huge-integer", "seed: " + "9" * 5000 + "\n", [], "5000 digits"),
    ("deep-nesting", "model: " + "[" * 3000 + "]" * 3000 + "\n", [], "nested deeper"),
    ("oversized-config", "name: " + "x" * (1 << 20) + "\n", [], "must be at most"),
    ("not-utf8", "name: caf\xe9\n".encode("latin-1"), [], "is not UTF-8"),
    ("not-yaml", "data: {clients: 3\n", [], "is not valid YAML"),
    ("top-level-list", "- 1\n- 2\n", [], "config"),
    ("unknown-key", None, ["--set", "training.lrr=0.1"], "training.lrr is not a known key"),
    ("unknown-algorithm", None, ["--set", "federated.algorithm=fedprox"], "fedprox"),
    ("negative-lr", None, ["--set", "training.lr=-1"], "training.lr"),
    ("nan-lr", None, ["--set", "training.lr=.nan"], "training.lr"),
    ("delta-too-large", None, ["--set", "privacy.delta=1.5"], "privacy.delta"),
    ("seed-beyond-uint64", None, ["--set", "seed=18446744073709551616"], "must be <= "
     "18446744073709551615"),
    ("negative-seed", None, ["--set", "seed=-1"], "seed"),
    ("rounds-absurd", None, ["--set", "federated.rounds=10000000"], "must be <= 1000000"),
    ("rounds-zero", None, ["--set", "federated.rounds=0"], "federated.rounds"),
    ("set-alias", None, ["--set", "model.kwargs={a: &x [1], b: *x}"], "anchor &x"),
    ("set-duplicate", None, ["--set", "model.kwargs={a: 1, a: 2}"], "a is given twice"),
    ("set-malformed", None, ["--set", "noequals"], "--set 'noequals' is not valid"),
    ("unknown-device", None, ["--set", "run.device=tpu"], "run.device = 'tpu'"),
    ("unavailable-device", None, ["--set", "run.device=cuda:7"], "is not available on this "
     "machine"),
    ("private-without-noise", None, ["--set", "federated.algorithm=dp-fedavg", "--set",
                                     "privacy.noise_multiplier=null"], "noise"),
    ("sigma-for-dp-fedavg", None, ["--set", "federated.algorithm=dp-fedavg", "--set",
                                   "privacy.sigma=1"], "privacy.sigma"),
    ("pld-too-big", None, ["--set", "privacy.accountants=[pld]", "--set",
                           "privacy.noise_multiplier=0.3", "--set", "federated.rounds=1000000"],
     "the pld accountant would need an FFT"),
    ("delta-zero", None, ["--set", "privacy.delta=0"], "privacy.delta"),
    ("missing-dataset", None, ["--set", "data.dataset=cifar10", "--set", "data.root=ROOT/none",
                               "--set", "model.name=zheng2021-cifar-cnn"], "cifar"),
    ("bad-model-kwarg", None, ["--set", "model.kwargs.depth=5"], "depth = 5 is not allowed"),
    ("classes-out-of-range", None, ["--set", "data.classes=[0, 99]"], "classes"),
    ("rounds-boolean", None, ["--set", "federated.rounds=true"],
     "federated.rounds = True is not allowed: must be a number, not a boolean"),
    ("checkpoint-every-boolean", None, ["--set", "run.checkpoint_every=false"],
     "run.checkpoint_every = False is not allowed"),
    ("huge-model", None, ["--set", "model.name=mlp", "--set", "model.kwargs.hidden=[1000000000]"],
     "model.kwargs = {'hidden': [1000000000]} gives model 'mlp' 795,000,000,010 parameters"),
    ("sigma-underflow", None, ["--set", "privacy.noise_multiplier=null", "--set",
                               "privacy.sigma=1e-300"], "privacy.sigma = '1e-300' is not "
     "allowed: out of range: must be >= 5e-101"),
]


@pytest.mark.parametrize(("text", "extra", "fragment"),
                         [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES])
def test_bad_run_inputs(tmp_path, capsys, text, extra, fragment):
    config = _tiny(tmp_path) if text is None else _yaml(tmp_path, "bad", text)
    extra = [str(a).replace("ROOT", str(tmp_path)) for a in extra]
    out = tmp_path / "out"
    code, err = _invoke(capsys, ["run", config, "--out", out, "--no-progress", *extra])
    _assert_one_line(code, err, fragment)
    assert not out.exists()  # nothing a later --resume could adopt


@pytest.mark.parametrize(("header", "copies", "fragment"), [
    (b"", 40, "unknown IDX type code"),
    (struct.pack(">IIII", 0x803, 10, 28, 28), 40, "unexpected trailing data"),
    (struct.pack(">IIII", 0x803, 2**32 - 1, 2**32 - 1, 2**32 - 1), 1, "refused"),
    (struct.pack(">IIII", 0x803, 2**31, 2, 2), 1, "more than a gzip file"),
], ids=["zeros", "trailing", "absurd-shape", "ratio"])
def test_hostile_idx_files(tmp_path, capsys, header, copies, fragment):
    root = _idx_root(tmp_path, "root", header, copies)
    out = tmp_path / "out"
    code, err = _invoke(capsys, ["run", _tiny(tmp_path), "--out", out, "--set",
                                 "data.dataset=mnist", "--set", f"data.root={root}"])
    _assert_one_line(code, err, fragment)
    assert not out.exists()


def test_out_paths(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, err = _invoke(capsys, ["run", _tiny(tmp_path), "--out", a_file])
    _assert_one_line(code, err, "is a file, not a directory")
    code, err = _invoke(capsys, ["run", _tiny(tmp_path), "--out", a_file / "sub"])
    _assert_one_line(code, err, "file")
    code, err = _invoke(capsys, ["run", _tiny(tmp_path), "--out", "/proc/privfl-run"])
    _assert_one_line(code, err, "/proc/privfl-run")
    foreign = tmp_path / "foreign"
    (foreign / "checkpoints").mkdir(parents=True)
    code, err = _invoke(capsys, ["run", _tiny(tmp_path), "--out", foreign])
    _assert_one_line(code, err, "holds files of another run")
    assert not (foreign / "config.yaml").exists()


def test_resume_faults(tmp_path, capsys):
    run = _run_ok(tmp_path, "run", "--set", "run.max_rounds=2")
    cases = [
        (["run", "--resume", tmp_path / "nowhere"], "is not a run directory"),
        (["run", _tiny(tmp_path), "--resume", run], "is not allowed with --resume"),
        (["run", "--resume", run, "--set", "seed=1"], "--set seed is not allowed with --resume"),
        (["run", "--resume", run, "--set", "federated.rounds=1"], "already completed 2 rounds"),
        (["run", "--resume", run, "--dry-run"], "--dry-run is not allowed with --resume"),
    ]
    for args, fragment in cases:
        _assert_one_line(*_invoke(capsys, args), fragment)
    for path in (run / "checkpoints").glob("*.pt"):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    # every checkpoint damaged: the run starts again from round 0 and says so (issue 34, 8)
    code, _ = _invoke(capsys, ["run", "--resume", run, "--no-progress", "--set",
                               "run.max_rounds=2"])
    assert code in (0, None)
    for record in (run / "checkpoints").glob("*.json"):  # written under another configuration
        record.write_text(record.read_text().replace('"config_sha256": "', '"config_sha256": "0'))
    _assert_one_line(*_invoke(capsys, ["run", "--resume", run]), "no usable checkpoint")
    (run / "run.json").unlink()
    _assert_one_line(*_invoke(capsys, ["run", "--resume", run]), "run.json is missing")


def test_other_commands(tmp_path, capsys):
    run = _run_ok(tmp_path, "run")
    damaged = _run_ok(tmp_path, "damaged")
    with open(damaged / "metrics.jsonl", "a") as stream:
        stream.write('{"round": 4, "glob\n')
    cases = [
        (["compare", run, damaged], "line 4 is not valid JSON"),
        (["compare", run, tmp_path / "nowhere"], "no config.yaml"),
        (["check-privacy", tmp_path / "nowhere"], "nowhere"),
        (["account", "dpsgd", "--noise-multiplier", "nan", "--sampling-rate", "0.01",
          "--steps", "100", "--delta", "1e-5"], "noise"),
        (["account", "dpsgd", "--noise-multiplier", "1", "--sampling-rate", "0.01",
          "--steps", "100", "--delta", "0"], "delta"),
        (["account", "dpsgd", "--noise-multiplier", "1", "--sampling-rate", "1.5",
          "--steps", "100", "--delta", "1e-5"], "sampling"),
        (["account", "dpsgd", "--sampling-rate", "0.01", "--steps", "100"], "noise"),
        (["account", "dpsgd", "--noise-multiplier", "1", "--sampling-rate", "5e-324",
          "--steps", "1000", "--delta", "1e-5"], "sampling_rate = 5e-324 is out of range: "
         "must be >= 2.2250738585072014e-308"),
        (["audit", "gaussian", "--sensitivity", "1", "--std", "1", "--epsilon", "1", "--delta",
          "1e-5", "--monte-carlo", "100000000000000"], "--monte-carlo = 100000000000000 is out "
         "of range: must be <= 1,000,000,000 with 1 step(s)"),
        (["audit", "gaussian", "--sensitivity", "1", "--std", "1", "--epsilon", "1", "--delta",
          "1e-5", "--steps", "1000", "--monte-carlo", "10000000"], "must be <= 1,000,000 with "
         "1000 step(s) (20,000,000,000 draws"),
        (["init", "--algorithm", "fedprox"], "fedprox"),
        (["init", "--out", tmp_path / "run" / "config.yaml"], "already exists"),
        (["list", "widgets"], "widgets"),
        (["run", "--bogus"], "No such option"),
        # the option it abbreviates, not click's string-similar --unit
        (["account", "dpsgd", "--noise", "1"], "No such option: --noise (did you mean "
         "--noise-multiplier?)"),
        (["account", "dpsgd", "--multiplier", "1"], "(did you mean --noise-multiplier?)"),
        (["distortion", "tv", "--variance", "-1", "--distorted-variance", "2",
          "--dimension", "3"], "variance"),
        (["distortion", "tv", "--variance", "1", "--distorted-variance", "2",
          "--dimension", "0"], "dimension"),
    ]
    for args, fragment in cases:
        _assert_one_line(*_invoke(capsys, args), fragment)


@pytest.mark.slow  # about 20 s on 2 cores: `make test-slow`
def test_a_kill_mid_run_leaves_a_resumable_run(tmp_path):
    """SIGKILL while rounds are running: the resumed run completes and equals an undisturbed
    one (checkpoints are written atomically with their digests). The kill lands after the first
    checkpoint and well before the last round (200 rounds of ~16 ms); the test checks that the
    process was still running and that the run had not finished when it was killed."""
    rounds = 200
    config = _tiny(tmp_path, federated={"rounds": rounds})
    base = [sys.executable, "-m", "privfl.cli.main", "run", "--no-progress"]
    cmd = [*base, str(config)]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    killed = subprocess.Popen([*cmd, "--out", str(tmp_path / "killed")], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoints = tmp_path / "killed" / "checkpoints"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and killed.poll() is None \
            and not list(checkpoints.glob("round-*.json")):
        time.sleep(0.01)
    assert killed.poll() is None, "the run ended before it could be killed mid-run"
    killed.send_signal(signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL
    at_kill = (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()
    assert 1 <= len(at_kill) < rounds, len(at_kill)
    resumed = subprocess.run([*base, "--resume", str(tmp_path / "killed"), "--json"],
                             env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    whole = subprocess.run([*cmd, "--out", str(tmp_path / "whole"), "--json"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stderr

    def rows(path):
        return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
                for line in (path / "metrics.jsonl").read_text().splitlines()]

    assert json.loads(resumed.stdout)["rounds_completed"] == rounds
    assert rows(tmp_path / "killed") == rows(tmp_path / "whole")


def test_there_are_at_least_forty_cases():
    assert len(RUN_CASES) + 4 + 4 + 7 + 16 >= 40  # run, IDX, --out, resume, others


def test_calibrate_over_budget_exits_1(capsys):
    """All three parameters given and over the target: the report, then exit status 1."""
    args = ["calibrate", "dpsgd", "--epsilon", "1", "--delta", "1e-5", "--sampling-rate",
            "0.01", "--noise-multiplier", "0.8", "--steps", "1000", "--method", "rdp"]
    code, _ = _invoke(capsys, args)
    assert code == 1
    code, _ = _invoke(capsys, [*args[:3], "100", *args[4:]])  # within budget
    assert code in (0, None)


def test_a_download_without_network_is_one_line_and_leaves_no_cache(tmp_path, capsys,
                                                                       monkeypatch):
    from privfl.data import download, sources

    real = download.download_mnist

    def offline(root=None, **kwargs):  # a host that never resolves, whatever the machine
        return real(root, mirrors=("http://privfl-no-network.invalid/",), **kwargs)

    monkeypatch.setattr(sources, "download_mnist", offline)
    root, out = tmp_path / "cache", tmp_path / "out"
    code, err = _invoke(capsys, ["run", _tiny(tmp_path), "--out", out, "--set",
                                 "data.dataset=mnist", "--set", "data.download=true", "--set",
                                 f"data.root={root}"])
    _assert_one_line(code, err, "could not download MNIST")
    assert "privfl-no-network.invalid" in err and "copy train-images-idx3-ubyte.gz" in err
    assert not root.exists() and not out.exists()
