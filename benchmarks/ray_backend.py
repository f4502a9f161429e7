"""Ray backend benchmark: client-updates per second with 1 and 2 Ray workers against the local
backend, measured in the same run, with the bytes and times of every round.

Run ``python benchmarks/ray_backend.py [--clients 16] [--steps 8] [--rounds 3]`` (or
``python benchmarks/engine.py --backend ray ...``, which calls this).

Workload: Zheng et al. 2021's MNIST CNN, ``--clients`` clients of 600 random MNIST-shaped
records, K = ``--steps`` local DP-SGD steps of B = 16 (Adam lr 1e-3, clip 1, noise multiplier 2),
in two call shapes:

* ``prifedsync`` — every client starts from its own model and carries its Adam state (sent to
  the workers and back every round), as in PriFedSync;
* ``dp-fedavg`` — every client starts from the global model (one object in the object store)
  and the states are discarded, as in DP-FedAvg and InsDP.

Backends: ``local`` (this process; the trainer's client threads, ``--threads``, default all
cores) and ``ray-W`` (a local Ray instance on 127.0.0.1, W actors of 1 CPU each). The first
Ray call of a backend starts its actors and puts the data into the object store: it is timed
separately (``setup``) and not counted. Every backend's flat models are checked equal to the
local ones (bit for bit). ``overhead`` = wall time of a round minus the slowest shard's compute
time on its worker: serialisation, object store, scheduling and the driver's merge.

The projection to a cluster is a model, not a measurement (see ``docs/benchmarks.md``).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

RECORDS, CLIP, NOISE, LR, BATCH = 600, 1.0, 2.0, 1e-3, 16


def _setup(clients: int, steps: int):
    import torch

    from privfl.fl import CohortTrainer, LocalTrainingSpec, replicate_params
    from privfl.fl.workers import available_cores
    from privfl.models import build_model

    torch.manual_seed(0)
    model = build_model("zheng2021-mnist-cnn")
    spec = LocalTrainingSpec(local_steps=steps, batch_size=BATCH, clip_norm=CLIP,
                             noise_multiplier=NOISE, optimizer="adam", lr=LR)
    trainer = CohortTrainer(model, spec, workers=available_cores())
    gen = torch.Generator().manual_seed(1)
    data = [(torch.randn(RECORDS, 1, 28, 28, generator=gen),
             torch.randint(0, 10, (RECORDS,), generator=gen)) for _ in range(clients)]
    start = trainer.flatten(replicate_params(model, clients))
    start.add_(1e-3 * torch.randn(start.shape, generator=gen))
    states = trainer.init_optimizer_state(clients)
    return trainer, data, start, states


def _calls(shape: str, start, states):
    """``(start, states, keep_states)`` of one call of the shape."""
    if shape == "prifedsync":
        return start, states, True
    return start[0].clone(), None, False


def _time_backend(backend, trainer, data, start, states, shape, rounds, seed=5):
    """Rounds of one backend: per-round seconds, the last result, the backend's records."""
    import torch

    begin, st, keep = _calls(shape, start, states)
    cohort = list(range(len(data)))
    seconds, result = [], None
    for r in range(rounds):
        gen = torch.Generator().manual_seed(seed + r)
        t0 = time.perf_counter()
        result = backend.train_clients(trainer, begin, data, cohort, st, gen, keep_states=keep)
        seconds.append(time.perf_counter() - t0)
    return seconds, result


def _fmt_bytes(n: float) -> str:
    return f"{n / 2**20:.2f} MiB"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="clients per round (M)")
    parser.add_argument("--steps", type=int, default=8, help="local steps per client (K)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per backend")
    parser.add_argument("--workers", default="1,2", help="Ray worker counts to measure")
    parser.add_argument("--shapes", default="prifedsync,dp-fedavg", help="call shapes")
    parser.add_argument("--cluster-nodes", type=int, default=16, help="projection: nodes")
    parser.add_argument("--cluster-cores", type=int, default=16,
                        help="projection: cores (workers) per node")
    parser.add_argument("--cluster-clients", type=int, default=1024,
                        help="projection: clients per round")
    parser.add_argument("--bandwidth-gbit", type=float, default=10.0,
                        help="projection: the driver's network bandwidth, Gbit/s")
    args = parser.parse_args(argv)

    import torch

    from privfl.backends import LocalBackend
    from privfl.backends.ray_backend import RayBackend

    torch.set_num_threads(1)
    trainer, data, start, states = _setup(args.clients, args.steps)
    worker_counts = [int(w) for w in args.workers.split(",")]
    print(f"zheng2021-mnist-cnn ({trainer.num_params:,} parameters), {args.clients} clients x "
          f"K={args.steps} steps, B={BATCH}, n_j={RECORDS}, Adam, C={CLIP}, z={NOISE}")
    print(f"torch {torch.__version__}, python {platform.python_version()}, {os.cpu_count()} "
          f"CPUs, local backend: {trainer.workers} client threads; load average at start "
          f"{os.getloadavg()[0]:.2f}")
    started = time.perf_counter()
    rows = []
    for shape in args.shapes.split(","):
        local_s, local_out = _time_backend(LocalBackend(), trainer, data, start, states, shape,
                                           args.rounds)
        results = {"local": (local_s, None)}
        for w in worker_counts:
            t0 = time.perf_counter()
            backend = RayBackend(workers=w)
            connect_s = time.perf_counter() - t0
            try:
                t0 = time.perf_counter()
                _time_backend(backend, trainer, data, start, states, shape, 1, seed=99)
                setup_s = time.perf_counter() - t0
                backend.records.clear()
                secs, out = _time_backend(backend, trainer, data, start, states, shape,
                                          args.rounds)
                assert torch.equal(out[0], local_out[0]), f"ray-{w} differs from local"
                results[f"ray-{w}"] = (secs, (connect_s, setup_s, backend.put_bytes,
                                              list(backend.records)))
            finally:
                backend.close()
        again, _ = _time_backend(LocalBackend(), trainer, data, start, states, shape,
                                 args.rounds)  # local again: load drift over the run
        results["local"] = (local_s + again, None)
        rows.append((shape, results))
    print(f"timing: {time.perf_counter() - started:.0f} s, load average at end "
          f"{os.getloadavg()[0]:.2f}; all Ray results equal the local ones bit for bit\n")

    m = args.clients
    for shape, results in rows:
        local_rate = m / statistics.median(results["local"][0])
        print(f"[{shape}] backend   updates/s  ratio  round s  sent/round  recv/round  "
              "slowest shard s  overhead s  setup s (connect + first call)  data put once")
        print(f"[{shape}] local     {local_rate:9.3f}  {1.0:5.2f}  "
              f"{statistics.median(results['local'][0]):7.2f}")
        for name, (secs, extra) in results.items():
            if extra is None:
                continue
            connect_s, setup_s, put, records = extra
            wall = statistics.median(secs)
            slowest = statistics.median(max(r.compute_seconds) for r in records)
            sent = statistics.median(r.bytes_sent for r in records)
            recv = statistics.median(r.bytes_received for r in records)
            print(f"[{shape}] {name:8s}  {m / wall:9.3f}  {m / wall / local_rate:5.2f}  "
                  f"{wall:7.2f}  {_fmt_bytes(sent):>10s}  {_fmt_bytes(recv):>10s}  "
                  f"{slowest:15.2f}  {wall - slowest:10.3f}  {connect_s:5.1f} + {setup_s:5.1f}"
                  f"  {_fmt_bytes(put)}")
        _projection(args, shape, results, m)


def _projection(args, shape, results, m) -> None:
    """Round time on N nodes x P workers: ceil(M' / (N P)) c + o + (b M') / BW (a model)."""
    name = max((k for k in results if k != "local"), key=lambda k: int(k.split("-")[1]))
    secs, (_, _, _, records) = results[name]
    workers = int(name.split("-")[1])
    per_client = statistics.median(max(r.compute_seconds) for r in records) / -(-m // workers)
    overhead = statistics.median(r.seconds - max(r.compute_seconds) for r in records)
    per_client_bytes = statistics.median((r.bytes_sent + r.bytes_received) / r.rows
                                         for r in records)
    n, p, clients = args.cluster_nodes, args.cluster_cores, args.cluster_clients
    bandwidth = args.bandwidth_gbit * 1e9 / 8
    waves = -(-clients // (n * p))
    transfer = per_client_bytes * clients / bandwidth
    total = waves * per_client + overhead + transfer
    print(f"[{shape}] projection (model, from {name}): c = {per_client:.2f} s per client-update "
          f"on one worker core, o = {overhead:.3f} s per round, b = "
          f"{_fmt_bytes(per_client_bytes)} per client through the driver; {n} nodes x {p} "
          f"workers, M = {clients}, {args.bandwidth_gbit:g} Gbit/s: round = {waves} x c + o + "
          f"M b / BW = {waves * per_client:.2f} + {overhead:.3f} + {transfer:.2f} s = "
          f"{total:.2f} s -> {clients / total:.1f} client-updates/s "
          f"({clients / total / (m / statistics.median(results['local'][0])):.1f}x this "
          "machine's local backend)\n")


if __name__ == "__main__":
    main()
