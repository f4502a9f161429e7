"""Projected noisy SGD (Asoodeh et al. 2021) against an Opacus per-user loop, one run.

Run ``python benchmarks/algorithms/projected_sgd.py [--rounds 5] [--users 280] [--records 5]
[--threads 1]``.

One client-update = one user's mean clipped record gradient. Both methods run the same rounds of
the one-pass schedule on digits (logistic regression, the demo's settings: rho = 0.05, L = 2,
z = 2, eta = 2), ``--users`` users of ``--records`` records, m = users / rounds per round:

* ``privfl-projected-sgd`` — :class:`privfl.algorithms.projected_sgd.ProjectedSgd` built from
  the demo configuration: its whole rounds (the users' clipped gradients on the vectorised
  engine, noise, step, projection, and the per-round last-iterate accounting);
* ``opacus-loop`` — the users one after the other: Opacus ``GradSampleModule`` per-sample
  gradients of the user's records, clipped at L, averaged; then the same noisy step and
  projection (no accounting), the baseline a per-user implementation would write.

The methods alternate round by round (after one untimed warm-up round each); the ratio
privfl / opacus is printed (record-level algorithms target >= 4).
"""

from __future__ import annotations

import argparse
import os
import sys

from _shared import alternate


def bench(rounds: int, users: int, *, records: int = 5, threads: int = 1,
          verbose: bool = True) -> dict:
    """Client-updates per second of projected noisy SGD and of the Opacus per-user loop."""
    import torch
    from opacus import GradSampleModule

    from privfl.algorithms.builders import build_dataset
    from privfl.algorithms.projected_sgd import ProjectedSgd
    from privfl.config import load_config

    for name, value in (("rounds", rounds), ("users", users), ("records", records),
                        ("threads", threads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} = {value!r} is out of range: must be an integer >= 1")
    if users % (rounds + 1):
        raise ValueError(f"users = {users} is out of range: must be a multiple of rounds + 1 = "
                         f"{rounds + 1} (one pass, one warm-up round)")
    torch.set_num_threads(threads)
    here = os.path.dirname(os.path.abspath(__file__))
    demo = os.path.join(here, "..", "..", "configs", "demo-projected-sgd.yaml")
    config = load_config(demo, [f"data.clients={users}", f"data.train_size={records}",
                                f"federated.rounds={rounds + 1}",
                                f"federated.users_per_round={users // (rounds + 1)}",
                                "privacy.accountants=[contraction]"])
    m = config.federated.users_per_round
    data = build_dataset(config)
    algorithm = ProjectedSgd.from_config(config, data)
    f, p = config.federated, config.privacy
    lr, rho, clip, std = f.lr, f.radius, p.clip_norm, p.noise_multiplier * p.clip_norm

    model = torch.nn.Linear(64, data.num_classes)
    net = GradSampleModule(model)
    xs = [torch.as_tensor(data.train.x[idx], dtype=torch.float32).reshape(len(idx), -1)
          for idx in data.train_indices]
    ys = [torch.as_tensor(data.train.y[idx], dtype=torch.int64) for idx in data.train_indices]
    gen = torch.Generator().manual_seed(0)
    order = torch.randperm(users, generator=gen)
    state = {"round": 0}

    def opacus_round() -> None:
        r = state["round"] % (rounds + 1)
        state["round"] += 1
        total = [torch.zeros_like(q) for q in model.parameters()]
        for j in order[r * m:(r + 1) * m].tolist():
            net.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(net(xs[j]), ys[j], reduction="sum")
            loss.backward()
            per = [q.grad_sample.reshape(len(ys[j]), -1) for q in model.parameters()]
            norms = torch.cat(per, 1).norm(dim=1)
            factors = (clip / norms.clamp_min(1e-12)).clamp(max=1.0) / len(ys[j])
            for acc, q in zip(total, model.parameters(), strict=True):
                acc += torch.einsum("b,b...->...", factors, q.grad_sample)
        with torch.no_grad():
            flat = torch.cat([q.reshape(-1) for q in model.parameters()])
            grad = torch.cat([t.reshape(-1) for t in total])
            grad = (grad + std * torch.randn(grad.shape, generator=gen)) / m
            flat -= lr * grad
            flat *= min(1.0, rho / max(float(flat.norm()), 1e-30))
            torch.nn.utils.vector_to_parameters(flat, model.parameters())

    algorithm.run_round()  # warm-up (first accounting, allocations)
    opacus_round()
    seconds = alternate({"privfl-projected-sgd": lambda r: algorithm.run_round(),
                         "opacus-loop": lambda r: opacus_round()}, rounds)
    rates = {name: rounds * m / s for name, s in seconds.items()}
    result = {**rates, "ratio": rates["privfl-projected-sgd"] / rates["opacus-loop"],
              "rounds": rounds, "users": users, "records": records, "threads": threads}
    if verbose:
        print(f"Projected noisy SGD vs Opacus per-user loop: digits logreg, {users} users x "
              f"{records} records, m = {m}, {rounds} timed rounds, {threads} threads, load "
              f"average {os.getloadavg()[0]:.2f}")
        for name, rate in rates.items():
            print(f"{name:22s} {rate:10.1f} client-updates/s   {seconds[name]:7.2f} s")
        print(f"privfl-projected-sgd / opacus-loop = {result['ratio']:.2f}   (target >= 4)")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (one more is warm-up)")
    parser.add_argument("--users", type=int, default=276, help="n: users (one pass)")
    parser.add_argument("--records", type=int, default=5, help="records per user")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    try:
        bench(args.rounds, args.users, records=args.records, threads=args.threads)
    except ValueError as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
