"""InsDP-FedAvg (Xie et al. 2023 Algorithm 3) against an Opacus per-client loop, one run.

Run ``python benchmarks/algorithms/insdp.py [--rounds 2] [--clients 20] [--steps 8]
[--batch-size 50] [--threads 2]``.

One client-update = one client's V local DP-SGD steps. Both methods train Zheng et al. 2021's
MNIST CNN (as :mod:`benchmarks.engine`) on ``--clients`` clients of 600 random MNIST-shaped
records, with fixed-size batches of B without replacement, flat clipping C = 1, noise multiplier
2, Adam (lr 1e-3):

* ``privfl-insdp-fedavg`` — :class:`privfl.algorithms.insdp.InsDpFedAvg`, every client every
  round (m = N): its whole round (the cohort's local DP-SGD on the vectorised engine, the server
  average, the global model's evaluation on 10 test records per client, and the per-round RDP
  accounting with the paper's scope);
* ``opacus-loop`` — ``benchmarks/engine.py``'s Opacus baseline (``GradSampleModule`` +
  ``DPOptimizer``, each client its own model and Adam state), the clients one after the other;
  local training only (no averaging, no evaluation, no accounting), so the ratio understates
  privfl's advantage slightly.

The methods alternate round by round (after one untimed warm-up round each) so that load on a
shared machine hits both alike; the ratio privfl / opacus is printed (target >= 4).
"""

from __future__ import annotations

import argparse
import os

from _shared import alternate, federation, load_engine


def bench(rounds: int, clients: int, *, steps: int = 8, batch: int = 50, threads: int = 2,
          verbose: bool = True, variant: str = "fedavg") -> dict:
    """Client-updates per second of InsDP-FedAvg (or, ``variant="fedsgd"``, InsDP-FedSGD: one
    DP-SGD step per client and round, plain SGD, so ``steps`` is 1) and of the Opacus loop
    (the same number of steps), measured together.

    Returns ``{"privfl-insdp-<variant>": rate, "opacus-loop": rate, "ratio": privfl / opacus,
    "rounds", "clients", "steps", "batch", "threads"}``.
    """
    import torch

    from privfl.algorithms.insdp import InsDpFedAvg, InsDpFedSgd
    from privfl.fl import LocalTrainingSpec
    from privfl.models import build_model

    for name, value in (("rounds", rounds), ("clients", clients), ("steps", steps),
                        ("batch", batch), ("threads", threads)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} = {value!r} is out of range: must be an integer >= 1")
    if variant not in ("fedavg", "fedsgd"):
        raise ValueError(f"variant = {variant!r} is not allowed: must be fedavg or fedsgd")
    if variant == "fedsgd":
        steps = 1
    engine = load_engine()
    if batch > engine.RECORDS:
        raise ValueError(f"batch = {batch} is out of range: must be <= {engine.RECORDS}")
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model("zheng2021-mnist-cnn")
    gen = torch.Generator().manual_seed(0)
    data = [(torch.randn(engine.RECORDS, 1, 28, 28, generator=gen),
             torch.randint(0, 10, (engine.RECORDS,), generator=gen)) for _ in range(clients)]

    spec = LocalTrainingSpec(local_steps=steps, batch_size=batch,
                             sampling="without-replacement", clip_norm=engine.CLIP,
                             noise_multiplier=engine.NOISE,
                             optimizer="adam" if variant == "fedavg" else "sgd", lr=engine.LR)
    cls = InsDpFedAvg if variant == "fedavg" else InsDpFedSgd
    algorithm = cls(model, spec, federation(data), seed=0, accountants="rdp")
    opacus = engine.Method("opacus-loop", model, data, steps, batch)
    everyone = list(range(clients))

    algorithm.run_round()  # warm-up (first accounting, allocations)
    opacus.run(everyone)
    seconds = alternate({f"privfl-insdp-{variant}": lambda r: algorithm.run_round(),
                         "opacus-loop": lambda r: opacus.run(everyone)}, rounds)
    rates = {name: rounds * clients / s for name, s in seconds.items()}
    result = {**rates, "ratio": rates[f"privfl-insdp-{variant}"] / rates["opacus-loop"],
              "rounds": rounds, "clients": clients, "steps": steps, "batch": batch,
              "threads": threads}
    if verbose:
        title = "InsDP-FedAvg" if variant == "fedavg" else "InsDP-FedSGD (privfl SGD, Opacus Adam)"
        print(f"{title} vs Opacus loop: zheng2021-mnist-cnn, {clients} clients x V={steps} "
              f"steps, B={batch}, {rounds} timed rounds, {threads} threads, load average "
              f"{os.getloadavg()[0]:.2f}")
        for name, rate in rates.items():
            print(f"{name:22s} {rate:8.3f} client-updates/s   {seconds[name]:7.1f} s")
        print(f"privfl-insdp-{variant} / opacus-loop = {result['ratio']:.2f}   (target >= 4)")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds per method")
    parser.add_argument("--clients", type=int, default=20, help="clients (all in every round)")
    parser.add_argument("--steps", type=int, default=8, help="V: local DP-SGD steps")
    parser.add_argument("--batch-size", type=int, default=50, help="B")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    try:
        bench(args.rounds, args.clients, steps=args.steps, batch=args.batch_size,
              threads=args.threads)
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
