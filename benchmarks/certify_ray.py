"""Certification on Ray: a short ``privfl certify`` on the local backend against Ray with W workers,
measured in the same run, with the rows, bytes and times of every engine call.

Run ``python benchmarks/certify_ray.py [--config configs/certify/xie2023-mnist01.yaml]
[--models 100] [--attackers 1] [--workers 1,2]``.

Each backend runs :func:`privfl.robustness.pipeline.run_certification` (M clean models, then M
models per k = 1..K backdoor attackers; replicas gathered into one engine call per round, batched
layout, 64 rows per chunk). ``local`` runs every call in this process (one torch thread);
``ray-W`` is a local Ray instance on 127.0.0.1 with W actors of 1 CPU each, started before the
timed certification (its start is reported as ``instance``). The first engine call of a Ray
backend starts the actors and puts the data into the object store (``setup``: the certification's
first call minus its compute); a later training with other data reloads the same actors. ``local``
is measured before and after the Ray backends to catch load drift. Every certification is
checked equal to the local one (certificates, bounds, privacy report; the bit-for-bit check of
predictions and probabilities is ``tests/backends/test_ray_certify.py``).

Per Ray call: ``rows`` (replica-clients), ``shards``, bytes to the workers (start rows, seeds,
client ids, learning rates) and back (trained rows, statistics), wall time, and ``overhead`` =
wall time minus the slowest shard's compute on its worker.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

MIB = 1024 * 1024


def _certify(config, models: int, attackers: int, backend=None):
    from privfl.robustness.pipeline import run_certification

    started = time.perf_counter()
    result = run_certification(config, models, attack="backdoor" if attackers else None,
                               attackers=attackers, backend=backend)
    data = result.to_dict()
    data.pop("seconds")
    data.pop("backend")
    return time.perf_counter() - started, json.dumps(data, sort_keys=True, default=str)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/certify/xie2023-mnist01.yaml")
    parser.add_argument("--models", type=int, default=100, help="M")
    parser.add_argument("--attackers", type=int, default=1, help="K (0: no attack)")
    parser.add_argument("--workers", default="1,2", help="Ray worker counts to measure")
    args = parser.parse_args()

    import torch

    from privfl.backends.ray_backend import RayBackend
    from privfl.config import load_config

    torch.set_num_threads(1)
    config = load_config(args.config)
    print(f"{config.name}: M = {args.models}, K = {args.attackers} backdoor attacker(s); "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.2f}, torch {torch.__version__}")
    _certify(config, 2, 0)  # warm-up: imports, data loading
    local, want = _certify(config, args.models, args.attackers)
    print(f"local: {local:.2f} s")
    for workers in (int(w) for w in args.workers.split(",")):
        tick = time.perf_counter()
        with RayBackend(workers=workers) as backend:
            instance = time.perf_counter() - tick
            seconds, got = _certify(config, args.models, args.attackers, backend)
            assert got == want, "the Ray certification differs from the local one"
            records = backend.records
        compute = [max(r.compute_seconds) for r in records]
        setup = records[0].seconds - compute[0]
        print(f"ray-{workers}: {seconds:.2f} s (ratio local/ray {local / seconds:.2f}); "
              f"instance {instance:.2f} s; first call's setup {setup:.2f} s; same result")
        print("  call  rows  shards  MiB out  MiB back  wall s  slowest shard s  overhead s")
        for i, (r, c) in enumerate(zip(records, compute, strict=True)):
            print(f"  {i + 1:4d}  {r.rows:4d}  {r.shards:6d}  {r.bytes_sent / MIB:7.2f}  "
                  f"{r.bytes_received / MIB:8.2f}  {r.seconds:6.2f}  {c:15.2f}  "
                  f"{r.seconds - c:10.2f}")
    again, _ = _certify(config, args.models, args.attackers)
    print(f"local again: {again:.2f} s")


if __name__ == "__main__":
    main()
