"""Engine benchmark: DP local training of Zheng et al. 2021's MNIST CNN, privfl against baselines.

Run ``python benchmarks/engine.py [--clients 50] [--steps 38] [--batch-size 16] [--repeats 1]``.

One client-update = one client's K local steps. For a round of ``--clients`` clients (each with
600 records, as in Zheng et al. 2021's MNIST split), batch size B, K steps, Adam (lr 1e-3), clip
norm 1, noise multiplier 2 (Zheng et al. 2021's sigma = 1), dropout on, it prints client-updates
per second and peak memory of

* ``privfl-dp[looped]``, ``privfl-dp[batched]`` — :class:`privfl.fl.CohortTrainer`, each layout
  (``layout="auto"`` resolves to looped on CPU);
* ``opacus-loop`` — a per-client sequential loop with Opacus (``GradSampleModule`` +
  ``DPOptimizer``: flat clipping, noise std z C on the sum, divided by the expected batch size)
  fed the same kind of fixed-size batches without replacement; each client keeps its own model
  and Adam state;
* ``privfl-nodp`` — the CohortTrainer with ``clip_norm=None``;
* ``plain-loop`` — a per-client non-private PyTorch loop (``torch.optim.Adam`` with its CPU
  default, the single-tensor implementation; mean loss);
* ``plain-loop-fused`` — the same with ``torch.optim.Adam(fused=True)``, the fused kernel privfl
  uses, to show how much of the difference is the optimizer;
* ``privfl-dp-secure`` (only with ``--methods``) — privfl-dp in secure mode (``secure=True``:
  noise and local batches from os.urandom);
* ``privfl-dp-pool`` (with ``--pool``, or ``--methods``) — privfl-dp (looped) reading every
  client's rows from one shared :class:`privfl.fl.DataPool` by index
  (``CohortTrainer.train_pool``) instead of per-client ``(x, y)`` copies that ``train``
  concatenates on every call; ``--pool`` adds it and ``privfl-dp[looped]`` and prints their
  ratios (speed and memory, same run);

then the ratios privfl-dp / opacus (target >= 4) and plain-loop / privfl-dp (target <= 1.5).

Method (robust on a shared machine): **speed** is measured in one process holding every method's
cohort; the round is cut into slices of ``--slice`` clients and the methods take turns slice by
slice (rotating the order), so load changes on the machine hit all methods alike. Each method
processes every client once per repeat. **Memory** is measured in a fresh process per method
(peak resident set size, ``VmHWM``) that sets up the full cohort and trains it for
``--memory-steps`` steps (memory does not grow with K): ``peak`` is the process's peak RSS,
``+train`` its growth over the state after setup (models, data, optimizer states).
Inputs are random tensors of MNIST shape (speed does not depend on pixel values).
``torch.set_num_threads(--threads)`` (default 2; privfl's engine then trains that many clients
at once, each on one torch thread, :mod:`privfl.fl.workers`).

``--contention N`` starts N competing processes for the duration of the timing, each a 2-thread
PyTorch matrix-multiplication loop (another user's training job on the same cores), to show how
each method degrades on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

METHODS = (
    "privfl-dp[looped]",
    "privfl-dp[batched]",
    "opacus-loop",
    "privfl-nodp",
    "plain-loop",
    "plain-loop-fused",
)
#: not run by default: privfl-dp in secure mode (noise and batches from os.urandom); privfl-dp
#: training from a shared data pool by index (``--pool``)
OPTIONAL = ("privfl-dp-secure", "privfl-dp-pool")
RECORDS = 600
CLIP, NOISE, LR = 1.0, 2.0, 1e-3


def _status_mb(key: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process's address space, in MiB.

    (``ru_maxrss`` would not do: Linux carries it over from the parent across fork + exec.)
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    if key == "VmHWM":
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return float("nan")


def _rss_mb() -> float:
    return _status_mb("VmRSS")


def _peak_mb() -> float:
    return _status_mb("VmHWM")


class Method:
    """One method's cohort (M clients) and a ``run(clients)`` doing their K local steps."""

    def __init__(self, name: str, model, data, steps: int, batch: int, *,
                 device: str = "cpu", chunk_size: int | None = None) -> None:
        """``device``: where the optimizer states live (``model`` and ``data`` are already
        there; benchmarks/gpu.py); ``chunk_size``: the CohortTrainer's clients per forward in
        the batched layout (None: from its memory budget). A name ending in ``-pool`` or
        ``-pool[layout]`` trains from one shared DataPool by index."""
        import copy

        import torch

        self.name, self.data, self.steps, self.batch = name, data, steps, batch
        self.seconds = 0.0
        self.info: dict = {}
        clients = len(data)
        self.gen = torch.Generator().manual_seed(1)
        if name.startswith("privfl"):
            from privfl.fl import CohortTrainer, LocalTrainingSpec, replicate_params

            private = name.startswith("privfl-dp")
            spec = LocalTrainingSpec(
                local_steps=steps, batch_size=batch, clip_norm=CLIP if private else None,
                noise_multiplier=NOISE if private else 0.0, optimizer="adam", lr=LR,
                secure="secure" in name,
            )
            layout = name[name.index("[") + 1 : -1] if "[" in name else "auto"
            self.trainer = CohortTrainer(model, spec, layout=layout, chunk_size=chunk_size)
            self.params = replicate_params(model, clients)
            self.states = self.trainer.init_optimizer_state(clients, device=device)
            self.info["layout"] = self.trainer.resolve_layout(device)
            self.pool = self.indices = None
            if "-pool" in name:  # one copy of every record; clients are index tensors
                from privfl.fl import DataPool

                self.pool, self.indices = DataPool.from_clients(data)
                self.data = None
            return
        self.nets, self.opts = [], []
        for _ in range(clients):
            net = copy.deepcopy(model).train()
            opt = torch.optim.Adam(net.parameters(), lr=LR, fused=name == "plain-loop-fused")
            if name == "opacus-loop":
                from opacus import GradSampleModule
                from opacus.optimizers import DPOptimizer

                net = GradSampleModule(net, loss_reduction="mean")
                opt = DPOptimizer(opt, noise_multiplier=NOISE, max_grad_norm=CLIP,
                                  expected_batch_size=batch, loss_reduction="mean")
            self.nets.append(net)
            self.opts.append(opt)

    def run(self, clients: list[int]) -> float:
        """K local steps for each of ``clients``; returns the seconds it took."""
        import warnings

        import torch
        import torch.nn.functional as F  # noqa: N812

        start = time.perf_counter()
        if self.name.startswith("privfl"):
            from privfl.fl import put_rows, take_rows

            if self.pool is not None:
                def train(params, rows, states):
                    return self.trainer.train_pool(
                        params, self.pool, [self.indices[j] for j in rows], states, self.gen)
            else:
                def train(params, rows, states):
                    return self.trainer.train(params, [self.data[j] for j in rows], states,
                                              self.gen)
            if clients == list(range(len(self.states["step"]))):  # the whole cohort: no row copies
                self.params, self.states, stats = train(self.params, clients, self.states)
            else:
                params, states, stats = train(
                    take_rows(self.params, clients), clients, take_rows(self.states, clients))
                put_rows(self.params, clients, params)
                put_rows(self.states, clients, states)
            self.info["chunk_size"] = max(self.info.get("chunk_size", 0), stats.chunk_size)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # opacus: full backward hooks on inputs
                for j in clients:
                    net, opt = self.nets[j], self.opts[j]
                    x, y = self.data[j]
                    for _ in range(self.steps):
                        idx = torch.randperm(RECORDS, generator=self.gen)[: self.batch]
                        opt.zero_grad(set_to_none=True)
                        F.nll_loss(net(x[idx]), y[idx]).backward()
                        opt.step()
                    opt.zero_grad(set_to_none=True)  # free (per-sample) gradients between rounds
        return time.perf_counter() - start


COMPETITOR = ("import torch\ntorch.set_num_threads(2)\na = torch.randn(384, 384)\n"
              "while True:\n    a = torch.tanh(a @ a)\n")


class competing_load:  # noqa: N801 - used as ``with competing_load(n):``
    """``n`` competing 2-thread PyTorch processes while the block runs (killed afterwards)."""

    def __init__(self, n: int) -> None:
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", COMPETITOR],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                      for _ in range(self.n)]
        if self.n:
            time.sleep(2.0)  # let them start spinning
            print(f"contention: {self.n} competing 2-thread PyTorch process(es) running")
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def _setup(names, clients, steps, batch, threads):
    import torch

    torch.set_num_threads(threads)
    from privfl.models import build_model

    torch.manual_seed(0)
    model = build_model("zheng2021-mnist-cnn")
    gen = torch.Generator().manual_seed(0)
    data = [
        (torch.randn(RECORDS, 1, 28, 28, generator=gen),
         torch.randint(0, 10, (RECORDS,), generator=gen))
        for _ in range(clients)
    ]
    return [Method(name, model, data, steps, batch) for name in names]


def _memory_child(name, clients, steps, batch, threads, memory_steps) -> dict:
    (method,) = _setup([name], clients, memory_steps, batch, threads)
    base = _rss_mb()
    seconds = method.run(list(range(clients)))
    peak = _peak_mb()
    return {"peak_mb": peak, "train_mb": peak - base, "seconds": seconds}


#: algorithm -> (module in benchmarks/algorithms, its baseline, target ratio privfl / baseline,
#: (timed rounds, clients) and keyword arguments of that module's bench: a DP-DSGD round is one
#: small step per client, a projected-SGD user holds one record as in its demo)
ALGORITHM_BENCHES = {
    "dp-fedavg": ("dp_fedavg", "plain-loop", 1.0, (2, 20), {}),
    "insdp-fedavg": ("insdp", "opacus-loop", 4.0, (2, 10), {}),
    "insdp-fedsgd": ("insdp", "opacus-loop", 4.0, (6, 20), {"variant": "fedsgd"}),
    "dp-dsgd": ("dp_dsgd", "opacus-loop", 4.0, (5, 400), {}),
    "projected-sgd": ("projected_sgd", "opacus-loop", 4.0, (5, 1434), {"records": 1}),
}


def _algorithm_benches(parser, args) -> None:
    """Client-updates per second of each algorithm's rounds against its per-client loop
    baseline, both measured in the same run (each module alternates the two round by round)."""
    import importlib.util

    names = (list(ALGORITHM_BENCHES) if args.algorithms == "all"
             else [n.strip() for n in args.algorithms.split(",") if n.strip()])
    unknown = [n for n in names if n not in ALGORITHM_BENCHES]
    if unknown:
        parser.error(f"--algorithms: unknown {unknown}; choose from "
                     f"{', '.join(ALGORITHM_BENCHES)} or all")
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "algorithms")
    if here not in sys.path:  # the modules import their shared helpers (_shared.py)
        sys.path.insert(0, here)
    rows = []
    for name in names:
        module_name, baseline, target, (rounds, clients), extra = ALGORITHM_BENCHES[name]
        spec = importlib.util.spec_from_file_location(module_name,
                                                      os.path.join(here, f"{module_name}.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with competing_load(args.contention):
            result = module.bench(rounds, clients, threads=args.threads, **extra)
        rates = {k: v for k, v in result.items() if k.startswith(("privfl", baseline))}
        ours = next(v for k, v in rates.items() if k.startswith("privfl"))
        rows.append((name, ours, baseline, rates.get(baseline, float("nan")),
                     result.get("ratio", float("nan")), target))
        print()
    print(f"{'algorithm':14s} {'privfl upd/s':>12s} {'baseline':>12s} {'base upd/s':>10s} "
          f"{'ratio':>6s} {'target':>7s}")
    for name, ours, baseline, base, ratio, target in rows:
        print(f"{name:14s} {ours:12.3f} {baseline:>12s} {base:10.3f} {ratio:6.2f} "
              f"{'>= ' + format(target, 'g'):>7s}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50, help="clients per round (M)")
    parser.add_argument("--steps", type=int, default=38, help="local steps per client (K)")
    parser.add_argument("--batch-size", type=int, default=16, help="batch size B")
    parser.add_argument("--repeats", type=int, default=1, help="rounds per method (timing)")
    parser.add_argument("--slice", type=int, default=2,
                        help="clients per turn in the timing phase (also the batched chunk)")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--memory-steps", type=int, default=2,
                        help="local steps in the memory runs (0: skip the memory runs)")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {', '.join(METHODS + OPTIONAL)}")
    parser.add_argument("--algorithms", default=None,
                        help="instead: each algorithm's whole rounds against its per-client "
                        f"loop baseline, comma-separated subset of {', '.join(ALGORITHM_BENCHES)}"
                        " or 'all' (benchmarks/algorithms/*.py at their own sizes; --threads)")
    parser.add_argument("--pool", action="store_true",
                        help="add privfl-dp-pool and privfl-dp[looped]; print their ratios")
    parser.add_argument("--contention", type=int, default=0,
                        help="competing 2-thread PyTorch processes during the timing (default 0)")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="ray: the Ray backend against the local one, 1 and 2 workers "
                        "(benchmarks/ray_backend.py; --clients and --steps are passed on)")
    args = parser.parse_args(argv)
    if args.backend == "ray":
        import ray_backend  # benchmarks/ray_backend.py, beside this script

        given = sys.argv[1:] if argv is None else list(argv)
        ray_backend.main([f"--{key}={getattr(args, key)}" for key in ("clients", "steps")
                          if any(a.startswith(f"--{key}") for a in given)])
        return
    if not 0 <= args.contention <= 16:
        parser.error(f"--contention = {args.contention} is out of range: must be in [0, 16]")
    if args.algorithms is not None:
        _algorithm_benches(parser, args)
        return
    for name in ("clients", "steps", "batch_size", "repeats", "slice", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} = {getattr(args, name)} must be >= 1")
    if args.memory_steps < 0:
        parser.error(f"--memory-steps = {args.memory_steps} must be >= 0")
    if args.batch_size > RECORDS:
        parser.error(f"--batch-size = {args.batch_size} must be <= {RECORDS} records per client")
    if args.memory_child:
        result = _memory_child(args.memory_child, args.clients, args.steps, args.batch_size,
                               args.threads, args.memory_steps)
        print("RESULT " + json.dumps(result))
        return
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    if args.pool:
        names += [m for m in ("privfl-dp[looped]", "privfl-dp-pool") if m not in names]
    unknown = [m for m in names if m not in METHODS + OPTIONAL]
    if unknown:
        parser.error(f"--methods: unknown {unknown}; choose from "
                     f"{', '.join(METHODS + OPTIONAL)}")
    if "opacus-loop" in names:
        try:
            import opacus  # noqa: F401
        except ImportError:
            print("opacus-loop: skipped (pip install opacus)")
            names.remove("opacus-loop")

    import torch

    print(f"zheng2021-mnist-cnn, {args.clients} clients x K={args.steps} steps, "
          f"B={args.batch_size}, "
          f"n_j={RECORDS}, Adam lr {LR}, C={CLIP}, z={NOISE}, dropout on")
    print(f"torch {torch.__version__}, {args.threads} threads, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}, load average at start {os.getloadavg()[0]:.2f}")

    # ---------------------------------------------------------------- speed (interleaved)
    methods = _setup(names, args.clients, args.steps, args.batch_size, args.threads)
    for method in methods:  # warm-up: one client's K steps
        method.run([0])
    slices = [list(range(lo, min(args.clients, lo + args.slice)))
              for lo in range(0, args.clients, args.slice)]
    turn = 0
    t0 = time.perf_counter()
    with competing_load(args.contention):
        for _ in range(args.repeats):
            for part in slices:
                order = methods[turn % len(methods):] + methods[: turn % len(methods)]
                turn += 1
                for method in order:
                    method.seconds += method.run(part)
    wall = time.perf_counter() - t0
    print(f"timing: {wall:.0f} s, load average at end {os.getloadavg()[0]:.2f}\n")
    rates = {m.name: args.repeats * args.clients / m.seconds for m in methods}

    # ---------------------------------------------------------------- memory (one process each)
    memory = {}
    if args.memory_steps:
        for name in names:
            cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", name,
                   "--clients", str(args.clients), "--steps", str(args.steps),
                   "--batch-size", str(args.batch_size), "--threads", str(args.threads),
                   "--memory-steps", str(args.memory_steps)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            line = [s for s in proc.stdout.splitlines() if s.startswith("RESULT ")]
            if proc.returncode or not line:
                print(f"{name}: memory run failed\n{proc.stderr[-2000:]}")
                continue
            memory[name] = json.loads(line[-1][7:])

    print(f"{'method':20s} {'updates/s':>10s} {'steps/s':>9s} {'round s':>8s} {'peak MB':>8s} "
          f"{'+train MB':>9s}")
    for m in methods:
        mem = memory.get(m.name, {})
        extra = (f"  layout={m.info['layout']} chunk={m.info.get('chunk_size')}"
                 if "layout" in m.info else "")
        print(f"{m.name:20s} {rates[m.name]:10.3f} {rates[m.name] * args.steps:9.2f} "
              f"{args.clients / rates[m.name]:8.1f} {mem.get('peak_mb', float('nan')):8.0f} "
              f"{mem.get('train_mb', float('nan')):9.0f}{extra}")

    if "privfl-dp-pool" in rates and "privfl-dp[looped]" in rates:
        copies, pooled = "privfl-dp[looped]", "privfl-dp-pool"
        print(f"\n{'privfl-dp-pool / privfl-dp[looped]':36s} = "
              f"{rates[pooled] / rates[copies]:6.3f}   (updates/s: shared pool vs per-client "
              "copies)")
        if copies in memory and pooled in memory:
            print(f"{'+train MB pool - copies':36s} = "
                  f"{memory[pooled]['train_mb'] - memory[copies]['train_mb']:6.0f}   "
                  f"(the copies path concatenates the cohort's data every call)")
    dp = {m: rates[m] for m in ("privfl-dp[looped]", "privfl-dp[batched]") if m in rates}
    if not dp:
        return
    print(f"\nfastest DP layout here: {max(dp, key=dp.get)}; layout='auto' on CPU -> looped")
    auto = dp.get("privfl-dp[looped]", max(dp.values()))
    for label, other, target in (
        ("privfl-dp[auto] / opacus-loop", "opacus-loop", "target >= 4"),
        ("plain-loop / privfl-dp[auto]", "plain-loop", "target <= 1.5"),
        ("plain-loop-fused / privfl-dp[auto]", "plain-loop-fused", "same Adam kernel"),
        ("privfl-nodp / privfl-dp[auto]", "privfl-nodp", "cost of DP inside privfl"),
    ):
        if other in rates:
            value = auto / rates[other] if label.startswith("privfl-dp") else rates[other] / auto
            print(f"{label:36s} = {value:6.2f}   ({target})")


if __name__ == "__main__":
    main()
