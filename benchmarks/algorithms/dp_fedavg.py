"""Client-level DP-FedAvg against a plain per-client PyTorch loop with server-side DP, one run.

Run ``python benchmarks/algorithms/dp_fedavg.py [--rounds 2] [--clients 20] [--steps 8]
[--batch-size 50] [--threads 2]``.

One client-update = one client's K local non-private SGD steps and its share of the server's
work. Both methods train Zheng et al. 2021's MNIST CNN (as :mod:`benchmarks.engine`) on
``--clients`` clients of 600 random MNIST-shaped records, every client every round, with
fixed-size batches of B without replacement and SGD (lr 0.02, momentum 0.9, weight decay 5e-4, a
fresh optimizer per client and round, as Xie et al. 2023's UserDP-FedAvg):

* ``privfl-dp-fedavg`` — :class:`privfl.algorithms.dp_fedavg.DpFedAvg` (fixed-size cohorts
  of m = N): its whole round (the cohort's local training on the vectorised engine, the
  updates, :class:`~privfl.fl.aggregation.ServerSideDp`'s flat clipping at S = 1, one Gaussian
  draw z S with z = 1 and the division by m, the global model's evaluation on 10 test records
  per client, and the per-round RDP accounting);
* ``plain-loop`` — the clients one after the other in plain PyTorch: load the global model into
  one network, K ``torch.optim.SGD`` steps, the flat update, clip it to S and add it to a sum;
  then one Gaussian draw z S on the sum, divide by m, step the global model. No evaluation and
  no accounting, so the ratio understates privfl's advantage slightly.

The methods alternate round by round (after one untimed warm-up round each) so that load on a
shared machine hits both alike; the ratio privfl / plain is printed (target >= 1: DP-FedAvg no
slower than the plain loop).
"""

from __future__ import annotations

import argparse
import os

from _shared import alternate, federation, load_engine

LR, MOMENTUM, WEIGHT_DECAY = 0.02, 0.9, 5e-4
CLIP, NOISE = 1.0, 1.0


class PlainLoop:
    """Per-client PyTorch loop with server-side flat clipping and Gaussian noise."""

    def __init__(self, model, data, steps: int, batch: int, records: int) -> None:
        import copy

        import torch
        from torch.nn.utils import parameters_to_vector

        self.net = copy.deepcopy(model).train()
        self.data, self.steps, self.batch, self.records = data, steps, batch, records
        self.global_flat = parameters_to_vector(self.net.parameters()).detach().clone()
        self.gen = torch.Generator().manual_seed(1)

    def run_round(self) -> None:
        import torch
        import torch.nn.functional as F  # noqa: N812
        from torch.nn.utils import parameters_to_vector, vector_to_parameters

        total = torch.zeros_like(self.global_flat)
        for x, y in self.data:
            with torch.no_grad():
                vector_to_parameters(self.global_flat, self.net.parameters())
            opt = torch.optim.SGD(self.net.parameters(), lr=LR, momentum=MOMENTUM,
                                  weight_decay=WEIGHT_DECAY)
            for _ in range(self.steps):
                idx = torch.randperm(self.records, generator=self.gen)[: self.batch]
                opt.zero_grad(set_to_none=True)
                F.nll_loss(self.net(x[idx]), y[idx]).backward()
                opt.step()
            with torch.no_grad():
                update = parameters_to_vector(self.net.parameters()) - self.global_flat
                total.add_(update, alpha=min(1.0, CLIP / max(float(update.norm()), 1e-30)))
        noise = torch.randn(total.shape, generator=self.gen, dtype=total.dtype)
        self.global_flat += (total + NOISE * CLIP * noise) / len(self.data)


def bench(rounds: int, clients: int, *, steps: int = 8, batch: int = 50, threads: int = 2,
          verbose: bool = True) -> dict:
    """Client-updates per second of DP-FedAvg and of the plain loop, measured together.

    Returns ``{"privfl-dp-fedavg": rate, "plain-loop": rate, "ratio": privfl / plain,
    "rounds", "clients", "steps", "batch", "threads"}``.
    """
    import torch

    from privfl.algorithms.dp_fedavg import DpFedAvg, DpFedAvgPrivacy
    from privfl.fl import LocalTrainingSpec
    from privfl.models import build_model

    for name, value in (("rounds", rounds), ("clients", clients), ("steps", steps),
                        ("batch", batch), ("threads", threads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} = {value!r} is out of range: must be an integer >= 1")
    records = load_engine().RECORDS
    if batch > records:
        raise ValueError(f"batch = {batch} is out of range: must be <= {records}")
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model("zheng2021-mnist-cnn")
    gen = torch.Generator().manual_seed(0)
    data = [(torch.randn(records, 1, 28, 28, generator=gen),
             torch.randint(0, 10, (records,), generator=gen)) for _ in range(clients)]

    spec = LocalTrainingSpec(local_steps=steps, batch_size=batch,
                             sampling="without-replacement", clip_norm=None,
                             optimizer="momentum", lr=LR, momentum=MOMENTUM,
                             weight_decay=WEIGHT_DECAY)
    plan = DpFedAvgPrivacy(num_clients=clients, client_sampling="fixed-size",
                           cohort_size=clients, noise_multiplier=NOISE, clip_norm=CLIP,
                           delta=1e-5, accountants="rdp")
    algorithm = DpFedAvg(model, spec, federation(data), plan, seed=0)
    plain = PlainLoop(model, data, steps, batch, records)

    algorithm.run_round()  # warm-up (first accounting, allocations)
    plain.run_round()
    seconds = alternate({"privfl-dp-fedavg": lambda r: algorithm.run_round(),
                         "plain-loop": lambda r: plain.run_round()}, rounds)
    rates = {name: rounds * clients / s for name, s in seconds.items()}
    result = {**rates, "ratio": rates["privfl-dp-fedavg"] / rates["plain-loop"],
              "rounds": rounds, "clients": clients, "steps": steps, "batch": batch,
              "threads": threads}
    if verbose:
        print(f"DP-FedAvg vs plain loop with server-side DP: zheng2021-mnist-cnn, {clients} "
              "clients "
              f"x K={steps} steps, B={batch}, {rounds} timed rounds, {threads} threads, load "
              f"average {os.getloadavg()[0]:.2f}")
        for name, rate in rates.items():
            print(f"{name:18s} {rate:8.3f} client-updates/s   {seconds[name]:7.1f} s")
        print(f"privfl-dp-fedavg / plain-loop = {result['ratio']:.2f}   (target >= 1)")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds per method")
    parser.add_argument("--clients", type=int, default=20, help="clients (all in every round)")
    parser.add_argument("--steps", type=int, default=8, help="K: local SGD steps")
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
