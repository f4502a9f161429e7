"""GPU device check: the engine on an accelerator against CPU, its speed, a profile, the demo.

Run ``python benchmarks/gpu.py [--device cuda] [--out DIR] [--budget-s 300] [--quick]``
(``--device cpu --quick``: the same code paths in well under a minute, ``tests/benchmarks``).
Results go to ``DIR/gpu.json`` and ``DIR/gpu.md`` (default ``$OUT`` when set, else
``benchmarks/results/gpu-DATE``), rewritten after every section and every speed row, so a run
that is cut short still leaves what it measured. Sections, in this order:

1. **correctness** — :class:`privfl.fl.CohortTrainer` with Zheng et al. 2021's MNIST CNN
   (dropout off), 4 clients, a few local steps and rounds (FedAvg of the cohort between rounds,
   optimizer states kept per client), for every optimizer (sgd, momentum, adam), privacy
   (``none``: no clipping; ``clip``: clip 1, noise 0; ``noise``: clip 1, noise multiplier 2) and
   layout (looped, batched) on the device, against CPU in its default layout (looped; CPU's
   batched layout is several times slower and agrees with it, see below). Each client's batch
   is all of its records, so both devices train on the same examples (the batch *order* comes
   from the device's generator and differs; a sum does not care up to rounding). TF32 is off.
   Checks: every parameter finite; without noise, every client's loss of every round and the
   final parameters equal CPU's within ``LOSS_RTOL`` / ``PARAM_RTOL`` (float summation order
   only: cuBLAS/cuDNN and CPU kernels add in other orders; the looped and batched layouts on
   CPU differ by 1.3e-7 in the losses and 2.9e-5 in the parameters, relative, at these sizes:
   the tolerances are ~1000x and ~100x that; ``cpu_spread`` in the results re-measures it).
   With noise the device's noise streams are other numbers than CPU's (one counter-based
   stream per client on CUDA, :func:`privfl.fl.noise_streams`), so the check is statistical:
   the update norm per round, dominated by ``d = 1.2 M`` Gaussian coordinates, must equal
   CPU's within ``NOISE_NORM_RTOL`` (two noise seeds on CPU differ by 3e-4 to 5e-4). A kernel
   that returns NaN (Adam's fused step reading float64 step counts wrongly on CUDA did) or a
   wrong noise scale (10% off) fails (``tests/benchmarks/test_gpu_script.py``).
2. **demo** — ``privfl run`` (the built-in demo, ``--set run.device=DEVICE``) as a subprocess:
   exit code, wall time, final accuracies, whether every round's train_loss is finite; the same
   on CPU for comparison (not with ``--quick`` or ``--device cpu``).
3. **profile** — ``torch.profiler`` over one round of privfl-dp (batched) at cohort 128: the top
   ops by self device time and by self CPU time, the count of synchronising calls (CUDA runtime
   synchronisations, ``aten::_local_scalar_dense`` = ``.item()``/``.tolist()``), and, from
   ``torch.cuda.set_sync_debug_mode("warn")`` over another round, the source lines that
   synchronise, by count.
4. **speed** — client-updates per second (one update = one client's K = 38 local steps of
   B = 16 of its 600 records, Adam lr 1e-3, clip 1, noise multiplier 2, dropout on; random
   inputs of MNIST shape) of the per-client Opacus loop and the plain non-DP PyTorch loop
   (cohort 8), privfl-dp batched (cohorts 16, 128, 1024), privfl no-DP batched (128),
   privfl-dp batched at 128 with TF32 and with the per-client convolution loop instead of the
   grouped convolution, then a chunk-size sweep at cohort 1024; the methods are
   ``benchmarks/engine.py``'s :class:`Method` (privfl rows train from one shared DataPool). Per
   row: a warm-up call (one client for the loops, one chunk for privfl), then whole rounds of
   the cohort, each between ``torch.cuda.synchronize()`` calls, until ``--rounds`` rounds ran or
   the row's share of the budget is spent (at least one); peak device memory
   (``torch.cuda.max_memory_allocated``, reset per row; ``base`` is what was allocated before
   the row: the shared data); the ratio to the Opacus loop. The speed section gets what the
   others left of ``--budget-s``, shared among the rows still to run; a row that would start
   with too little left is skipped and says so.

Exit status 0 when the correctness checks passed and no section raised, else 1.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:  # engine.py, beside this script
    sys.path.insert(0, str(HERE))
if str(ROOT / "src") not in sys.path:  # privfl from the checkout when not installed
    sys.path.insert(0, str(ROOT / "src"))

OPTIMIZERS = ("sgd", "momentum", "adam")
PRIVACY = ("none", "clip", "noise")
LAYOUTS = ("looped", "batched")
LR = {"sgd": 0.05, "momentum": 0.02, "adam": 1e-3}
CLIP, NOISE = 1.0, 2.0
#: without noise: per-client losses and final parameters, device against CPU (relative)
LOSS_RTOL, PARAM_RTOL = 1e-4, 3e-3
#: with noise: the update norm per round, device against CPU (relative)
NOISE_NORM_RTOL = 0.02
SECTIONS = ("correctness", "demo", "profile", "speed")


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The sizes of one run (full on a device, tiny with ``--quick``)."""

    clients: int = 4  # correctness: cohort
    records: int = 32  # correctness: records per client (= its batch)
    steps: int = 3  # correctness: local steps per round
    rounds: int = 3  # correctness: rounds
    speed_steps: int = 38  # speed: K
    loop_cohort: int = 8  # speed: the per-client loops
    cohorts: tuple[int, ...] = (16, 128, 1024)  # speed: privfl-dp batched
    nodp_cohort: int = 128
    sweep_cohort: int = 1024
    chunks: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
    profile_cohort: int = 128
    demo_rounds: int | None = None  # None: the demo's own 30


QUICK = Sizes(clients=2, records=8, steps=2, rounds=2, speed_steps=2, loop_cohort=2,
              cohorts=(2, 4), nodp_cohort=2, sweep_cohort=4, chunks=(2, 4), profile_cohort=2,
              demo_rounds=2)


# ---------------------------------------------------------------------------- the report
class Report:
    """The results so far, written as JSON and Markdown after every section and speed row."""

    def __init__(self, out: Path, meta: dict) -> None:
        self.out, self.start = out, time.perf_counter()
        self.data: dict = {"meta": meta, "sections": {}}

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def log(self, text: str) -> None:
        print(f"[{self.elapsed():6.1f} s] {text}", flush=True)

    def section(self, name: str, status: str, **values) -> None:
        self.data["sections"][name] = {"status": status, **values}
        self.write()

    def write(self) -> None:
        self.data["meta"]["elapsed_s"] = round(self.elapsed(), 2)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "gpu.json").write_text(json.dumps(_json_safe(self.data), indent=2) + "\n")
        (self.out / "gpu.md").write_text(markdown(self.data))


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def environment(device: str) -> dict:
    """Versions, the device's name and memory, the TF32 flags as torch starts."""
    import torch

    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device": device, "torch": torch.__version__, "python": platform.python_version(),
        "platform": platform.platform(), "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "tf32_default": {"matmul": torch.backends.cuda.matmul.allow_tf32,
                         "cudnn": torch.backends.cudnn.allow_tf32},
    }
    try:
        import opacus

        info.update(opacus=opacus.__version__, opacus_available=True)
    except Exception as error:  # noqa: BLE001 - any import failure means: no Opacus row
        info.update(opacus=f"not available ({type(error).__name__}: {error})",
                    opacus_available=False)
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    return info


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))


@contextlib.contextmanager
def tf32(enabled: bool):
    """TF32 for matmuls and cuDNN convolutions on (``True``) or off, restored afterwards."""
    import torch

    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


# ---------------------------------------------------------------------------- 1. correctness
@contextlib.contextmanager
def conv_loop(enabled: bool):
    """Convolutions of a batched chunk as a loop over clients (``True``) instead of the
    engine's default on this device (one grouped convolution off the CPU); restored after."""
    from privfl.fl._capture import Conv2dLayer

    before = Conv2dLayer.grouped
    Conv2dLayer.grouped = False if enabled else before
    try:
        yield
    finally:
        Conv2dLayer.grouped = before


def correctness_data(sizes: Sizes) -> list:
    """Each client's ``(x, y)`` on CPU: random MNIST-shaped inputs, labels 0..9."""
    import torch

    gen = torch.Generator().manual_seed(0)
    return [(torch.randn(sizes.records, 1, 28, 28, generator=gen),
             torch.randint(0, 10, (sizes.records,), generator=gen))
            for _ in range(sizes.clients)]


def trajectory(case: dict, device: str, data: list, sizes: Sizes, seed: int = 0) -> dict:
    """Train the case's cohort for ``sizes.rounds`` rounds on ``device``: per round each
    client's loss and the mean update norm, the final averaged parameters (on CPU).
    ``seed`` seeds the rounds' generators (other seeds: other noise)."""
    import torch

    from privfl.fl import CohortTrainer, LocalTrainingSpec, replicate_params
    from privfl.models import build_model

    torch.manual_seed(0)
    model = build_model("zheng2021-mnist-cnn", dropout=False).to(device)
    private = case["privacy"] != "none"
    spec = LocalTrainingSpec(
        local_steps=sizes.steps, batch_size=sizes.records, optimizer=case["optimizer"],
        lr=LR[case["optimizer"]], clip_norm=CLIP if private else None,
        noise_multiplier=NOISE if case["privacy"] == "noise" else 0.0)
    trainer = CohortTrainer(model, spec, layout=case["layout"])
    on_device = [(x.to(device), y.to(device)) for x, y in data]
    params = replicate_params(model, sizes.clients)
    states = trainer.init_optimizer_state(sizes.clients, device=device)
    initial = start = trainer.flatten(replicate_params(model, 1))
    losses, norms = [], []
    for r in range(sizes.rounds):
        params, states, stats = trainer.train(params, on_device, states,
                                              torch.Generator().manual_seed(seed + r))
        flat = trainer.flatten(params)
        norms.append(float((flat - start).norm(dim=1).mean()))
        start = flat.mean(0, keepdim=True)  # FedAvg: every client starts from the mean
        params = trainer.unflatten(start.expand(sizes.clients, -1).contiguous())
        losses.append(stats.loss.tolist())
    final = start.squeeze(0).double().cpu()
    return {"loss": losses, "update_norm": norms, "final": final,
            "displacement": float((final - initial.squeeze(0).double().cpu()).norm()),
            "finite": bool(torch.isfinite(final).all()) and all(
                math.isfinite(v) for row in losses for v in row)}


def _rel(a: float, b: float, floor: float = 1e-12) -> float:
    return abs(a - b) / max(abs(b), floor)


def compare(case: dict, dev: dict, ref: dict) -> dict:
    """The case's verdict: device against the CPU reference (see the module docstring)."""
    row = {**case, "finite": dev["finite"], "ref_finite": ref["finite"],
           "update_norm": dev["update_norm"], "ref_update_norm": ref["update_norm"],
           "loss_last": sum(dev["loss"][-1]) / len(dev["loss"][-1]),
           "ref_loss_last": sum(ref["loss"][-1]) / len(ref["loss"][-1])}
    norm_rel = max(_rel(a, b) for a, b in zip(dev["update_norm"], ref["update_norm"],
                                                strict=True))
    row["norm_rel_diff"] = norm_rel
    if case["privacy"] == "noise":
        row["check"] = f"finite, update norms within {NOISE_NORM_RTOL:g} (noise streams differ)"
        row["passed"] = dev["finite"] and ref["finite"] and norm_rel <= NOISE_NORM_RTOL
        return row
    loss_rel = max(_rel(a, b, 1e-3) for da, ra in zip(dev["loss"], ref["loss"], strict=True)
                   for a, b in zip(da, ra, strict=True))
    param_rel = float((dev["final"] - ref["final"]).norm()) / max(ref["displacement"], 1e-12)
    row.update(loss_rel_diff=loss_rel, param_rel_diff=param_rel,
               check=f"finite, losses within {LOSS_RTOL:g}, parameters within {PARAM_RTOL:g} "
                     "of the displacement")
    row["passed"] = (dev["finite"] and ref["finite"] and loss_rel <= LOSS_RTOL
                     and param_rel <= PARAM_RTOL)
    return row


def cpu_spread(data: list, sizes: Sizes) -> dict:
    """What the tolerances are set against, on CPU: looped against batched (Adam, clipping;
    float summation order) and, with noise (SGD), two other noise seeds (the update norm's
    spread between independent noise draws)."""
    case = {"optimizer": "adam", "privacy": "clip"}
    looped = trajectory({**case, "layout": "looped"}, "cpu", data, sizes)
    batched = trajectory({**case, "layout": "batched"}, "cpu", data, sizes)
    row = compare({**case, "layout": "batched vs looped"}, batched, looped)
    noisy = {"optimizer": "sgd", "privacy": "noise", "layout": "looped"}
    other = compare(noisy, trajectory(noisy, "cpu", data, sizes, seed=100),
                    trajectory(noisy, "cpu", data, sizes))
    return {"layout_loss_rel_diff": row["loss_rel_diff"],
            "layout_param_rel_diff": row["param_rel_diff"],
            "noise_seed_norm_rel_diff": other["norm_rel_diff"]}


def correctness_section(args, sizes: Sizes, report: Report) -> bool:
    data = correctness_data(sizes)
    rows = []
    with tf32(False):
        spread = cpu_spread(data, sizes)
        report.log(f"correctness: spread on CPU {spread}")
        for optimizer in OPTIMIZERS:
            for privacy in PRIVACY:
                reference = {"optimizer": optimizer, "privacy": privacy, "layout": "looped"}
                ref = trajectory(reference, "cpu", data, sizes)  # CPU's default layout
                for layout in LAYOUTS:
                    case = {"optimizer": optimizer, "privacy": privacy, "layout": layout}
                    row = compare(case, trajectory(case, args.device, data, sizes), ref)
                    rows.append(row)
                    report.log(f"correctness: {optimizer:8s} {privacy:5s} {layout:7s} "
                               f"{'ok' if row['passed'] else 'FAILED'}  update norm "
                               f"{row['update_norm'][-1]:.4g} "
                               f"(cpu {row['ref_update_norm'][-1]:.4g})")
    passed = all(r["passed"] for r in rows)
    report.section("correctness", "done", passed=passed, sizes=dataclasses.asdict(sizes),
                   tolerances={"loss_rtol": LOSS_RTOL, "param_rtol": PARAM_RTOL,
                               "noise_norm_rtol": NOISE_NORM_RTOL},
                   cpu_spread=spread, rows=rows)
    return passed


# ---------------------------------------------------------------------------- 2. demo
def demo_run(device: str, rounds: int | None, timeout: float) -> dict:
    """``privfl run`` (the built-in demo) on ``device`` in a subprocess; its run directory is
    a temporary one, removed afterwards (the device tool brings back at most 8 files)."""
    tmp = Path(tempfile.mkdtemp(prefix="privfl-gpu-demo-"))
    try:
        return _demo_in(tmp / "run", device, rounds, timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _demo_in(out: Path, device: str, rounds: int | None, timeout: float) -> dict:
    cmd = [sys.executable, "-c", "from privfl.cli.main import main; main()", "run",
           "--out", str(out), "--no-progress", "--set", f"run.device={device}"]
    if rounds is not None:
        cmd += ["--set", f"federated.rounds={rounds}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              check=False)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as error:
        code, stderr = None, f"timed out after {timeout:.0f} s\n{error.stderr or ''}"
    row = {"device": device, "command": " ".join(cmd[3:]), "exit_code": code,
           "wall_s": time.perf_counter() - start}
    summary, metrics = out / "summary.json", out / "metrics.jsonl"
    if summary.exists():
        final = json.loads(summary.read_text()).get("final") or {}
        row.update({k: final.get(k) for k in ("round", "personalised_accuracy",
                                               "global_accuracy")})
    if metrics.exists():
        losses = [json.loads(line).get("train_loss") for line in metrics.read_text().splitlines()
                  if line.strip()]
        row["train_loss_finite"] = bool(losses) and all(
            isinstance(v, (int, float)) and math.isfinite(v) for v in losses)
        row["train_loss_last"] = losses[-1] if losses else None
    if code != 0:
        row["stderr_tail"] = (stderr or "")[-2000:]
    return row


def demo_section(args, sizes: Sizes, report: Report) -> bool:
    runs = []
    devices = [args.device] + ([] if args.quick or args.device == "cpu" else ["cpu"])
    for device in devices:
        timeout = max(30.0, min(150.0, 0.3 * (args.budget_s - report.elapsed())))
        row = demo_run(device, sizes.demo_rounds, timeout)
        runs.append(row)
        report.log(f"demo on {device}: exit {row['exit_code']}, {row['wall_s']:.1f} s, "
                   f"personalised accuracy {row.get('personalised_accuracy')}")
        report.section("demo", "running", runs=runs)
    ok = all(r["exit_code"] == 0 and r.get("train_loss_finite") for r in runs)
    report.section("demo", "done", passed=ok, runs=runs)
    return ok


# ---------------------------------------------------------------------------- 3./4. speed
def speed_data(cohort: int, device: str) -> list:
    """``cohort`` clients' random MNIST-shaped data on ``device`` (views of one tensor)."""
    import torch
    from engine import RECORDS

    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(cohort * RECORDS, 1, 28, 28, generator=gen, device=device)
    y = torch.randint(0, 10, (cohort * RECORDS,), generator=gen, device=device)
    return [(x[j * RECORDS:(j + 1) * RECORDS], y[j * RECORDS:(j + 1) * RECORDS])
            for j in range(cohort)]


def make_method(name: str, cohort: int, data: list, steps: int, device: str,
                chunk: int | None = None):
    """``benchmarks/engine.py``'s Method for the first ``cohort`` clients of ``data``."""
    import torch
    from engine import Method

    from privfl.models import build_model

    torch.manual_seed(0)
    model = build_model("zheng2021-mnist-cnn").to(device)
    return Method(name, model, data[:cohort], steps, 16, device=device, chunk_size=chunk)


def method_finite(method) -> bool:
    """Whether every parameter of every client of ``method`` is finite."""
    import torch

    if hasattr(method, "params"):
        tensors = list(method.params.values())
    else:
        tensors = [p for net in method.nets for p in net.parameters()]
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def speed_rows(sizes: Sizes, device: str) -> list[dict]:
    """The table's rows, most important first (the budget may cut the tail)."""
    dp = "privfl-dp-pool[batched]"
    rows = [{"label": "opacus-loop", "method": "opacus-loop", "cohort": sizes.loop_cohort},
            {"label": "plain-loop", "method": "plain-loop", "cohort": sizes.loop_cohort}]
    rows += [{"label": "privfl-dp batched", "method": dp, "cohort": m} for m in sizes.cohorts]
    rows.append({"label": "privfl-nodp batched", "method": "privfl-nodp-pool[batched]",
                 "cohort": sizes.nodp_cohort})
    if device.startswith("cuda"):
        rows.append({"label": "privfl-dp batched TF32", "method": dp,
                     "cohort": sizes.profile_cohort, "tf32": True})
    # the CPU's per-client convolution loop instead of the accelerators' grouped convolution
    rows.append({"label": "privfl-dp batched conv loop", "method": dp,
                 "cohort": sizes.profile_cohort, "conv_loop": True})
    rows += [{"label": f"privfl-dp batched chunk {c}", "method": dp, "cohort": sizes.sweep_cohort,
              "chunk": c} for c in sizes.chunks]
    return rows


def time_row(row: dict, data: list, steps: int, device: str, rounds: int,
             budget: float) -> dict:
    """One speed row: set up, warm up, then whole rounds until ``rounds`` or ``budget`` s."""
    import torch

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated(torch.device(device))
        torch.cuda.reset_peak_memory_stats(torch.device(device))
    start = time.perf_counter()
    cohort = row["cohort"]
    with tf32(True) if row.get("tf32") else contextlib.nullcontext(), \
            conv_loop(bool(row.get("conv_loop"))):
        method = make_method(row["method"], cohort, data, steps, device, row.get("chunk"))
        warm = [0] if hasattr(method, "nets") else list(range(min(cohort, row.get("chunk")
                                                                     or cohort)))
        _sync(device)
        warm_start = time.perf_counter()
        method.run(warm)
        _sync(device)
        result = {"setup_s": warm_start - start, "warmup_s": time.perf_counter() - warm_start}
        seconds, done = 0.0, 0
        while done < rounds and (done == 0 or time.perf_counter() - start + seconds / done
                                 <= budget):
            _sync(device)
            t0 = time.perf_counter()
            method.run(list(range(cohort)))
            _sync(device)
            seconds += time.perf_counter() - t0
            done += 1
        result.update(tf32_matmul=torch.backends.cuda.matmul.allow_tf32,  # as timed
                      tf32_cudnn=torch.backends.cudnn.allow_tf32)
    result.update(rounds=done, seconds=seconds, updates_per_s=done * cohort / seconds,
                  round_s=seconds / done, finite=method_finite(method),
                  layout=method.info.get("layout"), chunk_size=method.info.get("chunk_size"))
    if cuda:
        result["peak_mib"] = torch.cuda.max_memory_allocated(torch.device(device)) / 2**20
        result["base_mib"] = base / 2**20
    del method
    return result


def speed_section(args, sizes: Sizes, report: Report) -> bool:
    rows = speed_rows(sizes, args.device)
    meta = report.data["meta"]
    data = speed_data(max(r["cohort"] for r in rows), args.device)
    done: list[dict] = []
    ok = True
    for i, row in enumerate(rows):
        left = args.budget_s - report.elapsed() - 5.0  # 5 s to write the results
        share = left / (len(rows) - i)
        if row["method"] == "opacus-loop" and not meta["opacus_available"]:
            done.append({**row, "skipped": f"opacus {meta['opacus']}"})
        elif share < 1.0:
            done.append({**row, "skipped": f"budget: {left:.0f} s left for {len(rows) - i} rows"})
        else:
            try:
                done.append({**row, **time_row(row, data, sizes.speed_steps, args.device,
                                               args.rounds, share)})
                ok = ok and done[-1]["finite"]
            except Exception as error:  # noqa: BLE001 - record it, go on with the next row
                done.append({**row, "error": f"{type(error).__name__}: {error}"})
                ok = False
        report.log(f"speed: {_row_text(done[-1])}")
        add_ratios(done)
        report.section("speed", "running", rows=done, sizes=dataclasses.asdict(sizes))
    report.section("speed", "done", rows=done, sizes=dataclasses.asdict(sizes))
    return ok


def add_ratios(rows: list[dict]) -> None:
    """Each measured row's speed relative to the Opacus loop (when that was measured)."""
    base = next((r.get("updates_per_s") for r in rows if r["method"] == "opacus-loop"), None)
    for r in rows:
        if base and "updates_per_s" in r:
            r["vs_opacus"] = r["updates_per_s"] / base


def _row_text(r: dict) -> str:
    what = f"{r['label']:28s} cohort {r['cohort']:5d}"
    if "skipped" in r or "error" in r:
        return f"{what}  {r.get('skipped') or r.get('error')}"
    memory = f", peak {r['peak_mib']:.0f} MiB" if "peak_mib" in r else ""
    return (f"{what}  {r['updates_per_s']:10.2f} updates/s ({r['rounds']} rounds, "
            f"chunk {r['chunk_size']}{memory})")


# ---------------------------------------------------------------------------- profile
SYNC_EVENTS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
               "aten::_local_scalar_dense", "aten::item", "cudaMemcpyAsync")


def _self_device_us(event) -> float:
    value = getattr(event, "self_device_time_total", None)
    if value is None:
        value = getattr(event, "self_cuda_time_total", 0.0)
    return float(value or 0.0)


def _top(events, key, n: int = 15) -> list[dict]:
    ranked = sorted(events, key=key, reverse=True)[:n]
    return [{"op": e.key, "calls": e.count, "self_device_ms": _self_device_us(e) / 1e3,
             "self_cpu_ms": e.self_cpu_time_total / 1e3} for e in ranked if key(e) > 0]


def sync_sites(method, cohort: int, device: str) -> list[dict]:
    """Source lines that synchronise the host with the device in one round, by count
    (``torch.cuda.set_sync_debug_mode("warn")``)."""
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            method.run(list(range(cohort)))
            _sync(device)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    counts: dict[str, int] = {}
    for w in caught:
        if "synchroniz" in str(w.message):
            where = f"{os.path.relpath(w.filename, ROOT)}:{w.lineno}"
            counts[where] = counts.get(where, 0) + 1
    return [{"where": k, "syncs": v} for k, v in sorted(counts.items(), key=lambda kv: -kv[1])]


def profile_section(args, sizes: Sizes, report: Report) -> bool:
    from torch.profiler import ProfilerActivity, profile

    cohort = sizes.profile_cohort
    cuda = args.device.startswith("cuda")
    method = make_method("privfl-dp-pool[batched]", cohort, speed_data(cohort, args.device),
                         sizes.speed_steps, args.device)
    method.run(list(range(cohort)))  # warm-up round
    _sync(args.device)
    sites = sync_sites(method, cohort, args.device) if cuda else []
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        seconds = method.run(list(range(cohort)))
        _sync(args.device)
    events = prof.key_averages()
    syncs = {name: sum(e.count for e in events if e.key == name) for name in SYNC_EVENTS}
    result = {"cohort": cohort, "steps": sizes.speed_steps, "round_s_profiled": seconds,
              "top_device": _top(events, _self_device_us) if cuda else [],
              "top_cpu": _top(events, lambda e: e.self_cpu_time_total),
              "sync_calls": syncs, "sync_sites": sites[:15],
              "sync_sites_total": sum(s["syncs"] for s in sites),
              "finite": method_finite(method)}
    report.log(f"profile: cohort {cohort}, {seconds:.2f} s profiled round, sync calls {syncs}")
    report.section("profile", "done", **result)
    return result["finite"]


# ---------------------------------------------------------------------------- markdown
def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else str(value)
    return str(value)


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]


def markdown(data: dict) -> str:
    """The results as Markdown (tables of every section present)."""
    meta, sections = data["meta"], data["sections"]
    lines = ["# GPU device check (`benchmarks/gpu.py`)", "",
             ", ".join(f"{k} {meta[k]}" for k in ("date", "device", "gpu", "torch", "cuda",
                                                  "opacus", "elapsed_s") if k in meta), ""]
    for name in SECTIONS:
        sec = sections.get(name)
        if sec is None:
            continue
        lines += [f"## {name} ({sec['status']})", ""]
        if "error" in sec:
            lines += ["```", sec["error"], "```", ""]
        lines += globals()[f"_md_{name}"](sec) + [""]
    return "\n".join(lines)


def _md_correctness(sec: dict) -> list[str]:
    if "rows" not in sec:
        return []
    rows = [[r["optimizer"], r["privacy"], r["layout"], r["passed"], r["finite"],
             r.get("loss_rel_diff"), r.get("param_rel_diff"), r["norm_rel_diff"],
             r["update_norm"][-1], r["ref_update_norm"][-1]] for r in sec["rows"]]
    return [f"passed: {_fmt(sec['passed'])}; tolerances {sec['tolerances']}; measured on "
            f"CPU {sec['cpu_spread']}", ""] + _table(
        ["optimizer", "privacy", "layout", "passed", "finite", "loss rel diff",
         "param rel diff", "norm rel diff", "update norm", "CPU update norm"], rows)


def _md_demo(sec: dict) -> list[str]:
    rows = [[r["device"], r["exit_code"], r["wall_s"], r.get("personalised_accuracy"),
             r.get("global_accuracy"), r.get("train_loss_finite")] for r in sec.get("runs", [])]
    lines = _table(["device", "exit", "wall s", "personalised acc", "global acc",
                    "train_loss finite"], rows)
    for r in sec.get("runs", []):
        if r.get("stderr_tail"):
            lines += ["", f"{r['device']} stderr (tail):", "```", r["stderr_tail"], "```"]
    return lines


def _md_speed(sec: dict) -> list[str]:
    rows = [[r["label"], r["cohort"], r.get("updates_per_s"), r.get("vs_opacus"),
             r.get("peak_mib"), r.get("base_mib"), r.get("chunk_size"), r.get("rounds"),
             r.get("finite"), r.get("skipped") or r.get("error")] for r in sec.get("rows", [])]
    return _table(["row", "cohort", "updates/s", "vs opacus", "peak MiB", "base MiB", "chunk",
                   "rounds", "finite", "note"], rows)


def _md_profile(sec: dict) -> list[str]:
    if "top_cpu" not in sec:
        return []
    lines = [f"cohort {sec['cohort']}, K = {sec['steps']}, profiled round "
             f"{_fmt(sec['round_s_profiled'])} s; sync calls {sec['sync_calls']}; "
             f"synchronising source lines: {sec['sync_sites_total']}", ""]
    for key, title in (("top_device", "self device time"), ("top_cpu", "self CPU time")):
        if sec[key]:
            lines += [f"Top ops by {title}:", ""] + _table(
                ["op", "calls", "self device ms", "self CPU ms"],
                [[e["op"], e["calls"], e["self_device_ms"], e["self_cpu_ms"]]
                 for e in sec[key]]) + [""]
    if sec["sync_sites"]:
        lines += ["Synchronising lines:", ""] + _table(
            ["where", "syncs"], [[s["where"], s["syncs"]] for s in sec["sync_sites"]])
    return lines


# ---------------------------------------------------------------------------- main
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results directory (default $OUT, else benchmarks/results/gpu-DATE)")
    parser.add_argument("--budget-s", type=float, default=300.0,
                        help="seconds for the whole run; the speed rows share what is left")
    parser.add_argument("--rounds", type=int, default=None,
                        help="timed rounds per speed row at most (default 3, 1 with --quick; "
                        "at least one always runs)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes (a smoke run of every code path)")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {', '.join(SECTIONS)}")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = (Path(os.environ["OUT"]) if os.environ.get("OUT")
                    else HERE / "results" / f"gpu-{datetime.date.today():%Y%m%d}")
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in args.only if s not in SECTIONS]
    if unknown:
        parser.error(f"--only: unknown {unknown}; choose from {', '.join(SECTIONS)}")
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.rounds < 1 or args.budget_s <= 0:
        parser.error("--rounds must be >= 1 and --budget-s > 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"--device {args.device}: torch {torch.__version__} sees no CUDA device")
        return 2
    sizes = QUICK if args.quick else Sizes()
    report = Report(args.out, {**environment(args.device), "quick": args.quick,
                               "budget_s": args.budget_s, "argv": sys.argv[1:]})
    report.log(f"{report.data['meta']}")
    ok = True
    for name in SECTIONS:
        if name not in args.only:
            continue
        report.log(f"{name} ...")
        try:
            ok = globals()[f"{name}_section"](args, sizes, report) and ok
        except Exception:  # noqa: BLE001 - record it; the next section still runs
            report.section(name, "error", error=traceback.format_exc()[-3000:])
            report.log(f"{name}: ERROR\n{traceback.format_exc()}")
            ok = False
    report.log(f"done: {'all checks passed' if ok else 'SOME CHECKS FAILED'}; results in "
                f"{args.out}")
    report.write()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
