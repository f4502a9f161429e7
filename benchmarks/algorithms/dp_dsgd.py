"""DP-DSGD with random participation (Hasircioglu and Gunduz 2022) against an Opacus client loop.

Run ``python benchmarks/algorithms/dp_dsgd.py [--rounds 3] [--clients 200] [--records 30]
[--client-rate 0.5] [--record-rate 0.1] [--threads 2]``.

One client-update = what one participating client computes in one iteration of Algorithm 1:
the sum of the clipped per-record gradients of its Poisson-sampled records at the current
global model. Both methods use the paper's network (the Opacus MNIST CNN, 62 classes, the
``hasircioglu2022-emnist-cnn`` model) on ``--clients`` clients of ``--records`` random EMNIST-shaped
records, flat clipping C = 1, and run **the same cohorts** (participants and records drawn by
privfl's sampler, p = ``--client-rate``, q = ``--record-rate``; the defaults keep the paper's
section 6.1 local setting d = 30, q = 0.1 with more participants per round):

* ``privfl-dp-dsgd`` - :meth:`privfl.algorithms.dp_dsgd.DpDsgd.run_round` minus the sampling:
  every sampled record of the iteration on the engine together (``CohortTrainer.clipped_sums``),
  one N(0, sigma^2 I) at the trusted server, the division by p q sum n_i, the momentum step, the
  per-iteration accounting (wcs with RDP composition) and an evaluation on 100 test records;
* ``opacus-loop`` - ``GradSampleModule`` on the global model, one participant after the other:
  forward/backward of its sampled records, ``DPOptimizer.clip_and_accumulate`` (Opacus's flat
  per-sample clipping and sum), its clipped sum added to the server's total; then the same noise,
  division and momentum step (``torch.optim.SGD``). No accounting, no evaluation, so the ratio
  understates privfl's advantage slightly.

The methods alternate iteration by iteration (after one untimed warm-up each) so that load on a
shared machine hits both alike; the ratio privfl / opacus is printed (target >= 4).
"""

from __future__ import annotations

import argparse
import os

from _shared import alternate

CLIP, NOISE, LR, MOMENTUM = 1.0, 1.0, 0.002, 0.9


def _federation(clients: int, records: int, classes: int = 62, test: int = 100):
    import numpy as np
    import torch

    from privfl.data import Dataset, FederatedDataset

    gen = torch.Generator().manual_seed(0)
    total = clients * records + test
    x = torch.randn(total, 1, 28, 28, generator=gen).numpy()
    y = torch.randint(0, classes, (total,), generator=gen).numpy()
    pool = Dataset(x, y, "random-emnist", classes, normalized=True)
    train = [np.arange(j * records, (j + 1) * records) for j in range(clients)]
    tests = [np.zeros(0, dtype=np.int64)] * (clients - 1) + [
        np.arange(clients * records, total)]
    return FederatedDataset(pool, pool, train, tests, name=f"random-emnist({clients})")


class _OpacusLoop:
    """Algorithm 1 with Opacus doing each participant's clipped sum, one client at a time."""

    def __init__(self, model, algorithm) -> None:
        import copy

        import torch
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        self.algorithm = algorithm
        self.net = GradSampleModule(copy.deepcopy(model).train(), loss_reduction="sum")
        self.server = torch.optim.SGD(self.net.parameters(), lr=LR, momentum=MOMENTUM)
        self.clipper = DPOptimizer(torch.optim.SGD(self.net.parameters(), lr=LR),
                                   noise_multiplier=0.0, max_grad_norm=CLIP,
                                   expected_batch_size=1, loss_reduction="sum")
        self.gen = torch.Generator().manual_seed(1)

    def run(self, cohort) -> None:
        import warnings

        import torch
        import torch.nn.functional as F  # noqa: N812

        params = [p for p in self.net.parameters() if p.requires_grad]
        total = [torch.zeros_like(p) for p in params]
        x_all, y_all = self.algorithm._x, self.algorithm._y
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # opacus: full backward hooks on inputs
            for rows in cohort.records:
                if rows.size == 0:
                    continue
                index = torch.as_tensor(rows)
                self.clipper.zero_grad(set_to_none=True)
                F.cross_entropy(self.net(x_all[index]), y_all[index], reduction="sum").backward()
                self.clipper.clip_and_accumulate()
                for t, p in zip(total, params, strict=True):
                    t += p.summed_grad
        self.clipper.zero_grad(set_to_none=True)
        divisor = self.algorithm.plan.expected_records
        for t, p in zip(total, params, strict=True):
            noise = torch.empty_like(t).normal_(generator=self.gen).mul_(NOISE * CLIP)
            p.grad = (t + noise) / divisor
        self.server.step()
        self.server.zero_grad(set_to_none=True)


def bench(rounds: int, clients: int, *, records: int = 30, client_rate: float = 0.5,
          record_rate: float = 0.1, threads: int = 2, verbose: bool = True) -> dict:
    """Client-updates per second of DP-DSGD and of the Opacus loop, measured together.

    Returns ``{"privfl-dp-dsgd": rate, "opacus-loop": rate, "ratio": privfl / opacus,
    "rounds", "clients", "participants", "records", "sampled_records", "client_rate",
    "record_rate", "threads"}`` (``participants`` and ``sampled_records``: totals over the
    timed iterations, the same for both methods).
    """
    import torch

    from privfl.algorithms.dp_dsgd import DpDsgd, DpDsgdPrivacy
    from privfl.models import build_model

    for name, value in (("rounds", rounds), ("clients", clients), ("records", records),
                        ("threads", threads)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} = {value!r} is out of range: must be an integer >= 1")
    for name, value in (("client_rate", client_rate), ("record_rate", record_rate)):
        if not 0.0 < value <= 1.0:
            raise ValueError(f"{name} = {value!r} is out of range: must be in (0, 1]")
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model("hasircioglu2022-emnist-cnn")
    data = _federation(clients, records)
    plan = DpDsgdPrivacy(data.client_sizes, client_rate=client_rate, record_rate=record_rate,
                         noise_multiplier=NOISE, clip_norm=CLIP, delta=1e-6, schemes=("wcs",),
                         composition=("rdp",))
    algorithm = DpDsgd(model, data, plan, server_lr=LR, server_momentum=MOMENTUM, seed=0)
    opacus = _OpacusLoop(model, algorithm)
    cohorts = [algorithm.select_cohort() for _ in range(rounds + 1)]
    algorithm.select_cohort = lambda: cohorts[algorithm.round]  # the same cohorts for both

    algorithm.run_round()  # warm-up (allocations, first accounting)
    opacus.run(cohorts[0])
    seconds = alternate({"privfl-dp-dsgd": lambda r: algorithm.run_round(),
                         "opacus-loop": lambda r: opacus.run(cohorts[r])}, rounds, first=1)
    updates = sum(int(c.participants.size) for c in cohorts[1:])
    sampled = sum(int(c.indices.size) for c in cohorts[1:])
    rates = {name: updates / s for name, s in seconds.items()}
    result = {**rates, "ratio": rates["privfl-dp-dsgd"] / rates["opacus-loop"],
              "rounds": rounds, "clients": clients, "participants": updates,
              "records": records, "sampled_records": sampled, "client_rate": client_rate,
              "record_rate": record_rate, "threads": threads}
    if verbose:
        print(f"DP-DSGD vs Opacus loop: hasircioglu2022-emnist-cnn, {clients} clients x "
              f"d={records}, "
              f"p={client_rate:g}, q={record_rate:g}, {rounds} timed iterations "
              f"({updates} client-updates, {sampled} records), {threads} threads, load average "
              f"{os.getloadavg()[0]:.2f}")
        for name, rate in rates.items():
            print(f"{name:16s} {rate:9.1f} client-updates/s   {seconds[name]:7.2f} s")
        print(f"privfl-dp-dsgd / opacus-loop = {result['ratio']:.2f}   (target >= 4)")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed iterations per method")
    parser.add_argument("--clients", type=int, default=200, help="N: clients")
    parser.add_argument("--records", type=int, default=30, help="d: records per client")
    parser.add_argument("--client-rate", type=float, default=0.5, help="p")
    parser.add_argument("--record-rate", type=float, default=0.1, help="q")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    try:
        bench(args.rounds, args.clients, records=args.records, client_rate=args.client_rate,
              record_rate=args.record_rate, threads=args.threads)
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
