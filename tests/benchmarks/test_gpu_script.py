"""benchmarks/gpu.py, the prepared device check: ``--device cpu --quick`` runs every section's
code path and writes complete results; its correctness check fails on the kinds of bug it is
for (a NaN from an optimizer kernel, a wrong noise scale)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu.py"


@pytest.fixture(scope="module")
def gpu():
    """The script as a module (its sys.path additions undone: only privfl is used here)."""
    before = list(sys.path)
    spec = importlib.util.spec_from_file_location("privfl_bench_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = before
    yield module
    sys.modules.pop(spec.name, None)


def _finite_numbers(value) -> bool:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, (int, float)):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite_numbers(v) for v in value.values())
    return all(_finite_numbers(v) for v in value)


def test_quick_cpu_run_writes_every_section(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((tmp_path / "gpu.json").read_text())
    sections = data["sections"]
    assert {k: v["status"] for k, v in sections.items()} == dict.fromkeys(
        ("correctness", "demo", "profile", "speed"), "done")
    assert _finite_numbers(data)  # non-finite floats would be written as strings: none
    correctness = sections["correctness"]
    assert correctness["passed"] and len(correctness["rows"]) == 3 * 3 * 2
    assert all(row["passed"] and row["finite"] for row in correctness["rows"])
    demo = sections["demo"]["runs"]
    assert [r["device"] for r in demo] == ["cpu"]
    assert demo[0]["exit_code"] == 0 and demo[0]["train_loss_finite"]
    assert 0 <= demo[0]["personalised_accuracy"] <= 1
    profile = sections["profile"]
    assert profile["top_cpu"] and profile["finite"]
    rows = sections["speed"]["rows"]
    labels = [r["label"] for r in rows]
    assert labels[:2] == ["opacus-loop", "plain-loop"]
    assert "privfl-nodp batched" in labels and any("chunk" in label for label in labels)
    for row in rows:
        if row["label"] == "opacus-loop" and "skipped" in row:
            continue  # opacus not installed
        assert row["updates_per_s"] > 0 and row["finite"], row
    chunks = [r for r in rows if "chunk" in r]
    assert [r["chunk_size"] for r in chunks] == [r["chunk"] for r in chunks]
    text = (tmp_path / "gpu.md").read_text()
    assert "## speed (done)" in text and "| opacus-loop |" in text
    # the device tool brings back at most 8 files: the demo's run directory is not kept
    assert sorted(f.name for f in tmp_path.iterdir()) == ["gpu.json", "gpu.md"]


def _run(gpu, case):
    data = gpu.correctness_data(gpu.QUICK)
    return gpu.trajectory(case, "cpu", data, gpu.QUICK)


def test_correctness_check_catches_a_nan_from_the_optimizer(gpu, monkeypatch):
    """The failure seen on CUDA: Adam's fused step produced NaN after one step."""
    from privfl.fl.optim import StackedOptimizer

    case = {"optimizer": "adam", "privacy": "clip", "layout": "batched"}
    reference = _run(gpu, case)
    assert gpu.compare(case, _run(gpu, case), reference)["passed"]
    step = StackedOptimizer.step_

    def broken(self, params, grad, state, lr):
        step(self, params, grad, state, lr)
        if float(state["step"].max()) > 1:
            params[:, :10] = math.nan

    monkeypatch.setattr(StackedOptimizer, "step_", broken)
    row = gpu.compare(case, _run(gpu, case), reference)
    assert not row["passed"] and not row["finite"]


def test_correctness_check_catches_a_wrong_noise_scale(gpu, monkeypatch):
    """With noise the device's streams differ, but a 10% wrong noise scale fails the
    update-norm comparison."""
    case = {"optimizer": "sgd", "privacy": "noise", "layout": "looped"}
    reference = _run(gpu, case)
    monkeypatch.setattr(gpu, "NOISE", gpu.NOISE * 1.1)
    row = gpu.compare(case, _run(gpu, case), reference)
    assert not row["passed"] and row["finite"] and row["norm_rel_diff"] > gpu.NOISE_NORM_RTOL
