"""Text-model engine benchmark: DP local training of the LSTMs, privfl against Opacus' loop.

Run ``python benchmarks/text_engine.py [--model sent140|shakespeare|both] [--clients 4]
[--steps 4] [--batch-size 10] [--repeats 3] [--threads 1]``.

Models (random weights; speed does not depend on the values):

* ``sent140``: Xie et al. 2023's Sent140 LSTM (:class:`privfl.models.Xie2023Sent140LSTM`,
  frozen 300-d embeddings over a 10,000-word vocabulary, two LSTM layers of 256, T = 25);
* ``shakespeare``: LEAF's character LSTM (:class:`privfl.models.LeafShakespeareLSTM`, trained
  8-d embedding over 82 characters, two layers of 256, T = 80).

Methods, each client with its own model and Adam state (lr 1e-3), fixed-size batches of B
from its 100 records, clip norm 1, noise multiplier 1:

* ``privfl-dp``: :class:`privfl.fl.CohortTrainer` (``layout="auto"``: looped on CPU), whose
  per-example gradients for Embedding and LSTM come from one captured ``(a, delta)`` per layer
  (:mod:`privfl.fl._capture_sequence`);
* ``opacus-loop``: a per-client sequential loop with Opacus: the same weights in a model whose
  ``nn.LSTM`` is Opacus' ``DPLSTM`` (``nn.LSTM`` has no Opacus grad sampler), wrapped in
  ``GradSampleModule`` + ``DPOptimizer`` (flat clipping, noise std z C on the sum divided by B);
* ``plain-loop``: the same loop without DP (``nn.LSTM``'s fused kernel, mean loss).

Speed is measured in one process; the methods take turns client by client (rotating the order,
so load changes on a shared machine hit all alike), ``--repeats`` rounds each. Prints
client-steps per second and the ratios privfl-dp / opacus-loop (goal >= 3) and
plain-loop / privfl-dp.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import time
import warnings

import torch
import torch.nn.functional as F  # noqa: N812

RECORDS = 100
CLIP, NOISE, LR = 1.0, 1.0, 1e-3
MODELS = {"sent140": ("xie2023-sent140-lstm", 10_000, 25, 2),
          "shakespeare": ("leaf-shakespeare-lstm", 82, 80, 82)}


def _model(key: str):
    from privfl.models import build_model

    name, vocab, seq, classes = MODELS[key]
    words = ("<pad>", "<unk>") + tuple(f"w{i}" for i in range(vocab - 2))
    kwargs = {"freeze_embeddings": True} if key == "sent140" else {}
    torch.manual_seed(0)
    model = build_model(name, vocabulary=words, input_shape=(seq,), **kwargs)
    gen = torch.Generator().manual_seed(0)
    return model, gen, vocab, seq, classes


def _opacus_copy(model):
    """``model`` with its ``nn.LSTM`` replaced by Opacus' ``DPLSTM`` holding the same weights."""
    from opacus.layers import DPLSTM

    net = copy.deepcopy(model)
    lstm = model.lstm
    dp = DPLSTM(lstm.input_size, lstm.hidden_size, num_layers=lstm.num_layers, batch_first=True)
    dp.load_state_dict(lstm.state_dict())
    net.lstm = dp
    return net


class Method:
    """One method's clients and ``run(j)``: client j's K local steps."""

    def __init__(self, name, model, data, steps, batch) -> None:
        self.name, self.data, self.steps, self.batch = name, data, steps, batch
        self.seconds, self.client_steps = 0.0, 0
        self.gen = torch.Generator().manual_seed(1)
        if name == "privfl-dp":
            from privfl.fl import CohortTrainer, LocalTrainingSpec, replicate_params

            spec = LocalTrainingSpec(local_steps=steps, batch_size=batch, clip_norm=CLIP,
                                     noise_multiplier=NOISE, optimizer="adam", lr=LR)
            self.trainer = CohortTrainer(model, spec)
            assert self.trainer.uses_fast_path, self.trainer.model.fallback_reason
            self.params = replicate_params(model, len(data))
            self.states = self.trainer.init_optimizer_state(len(data))
            return
        self.nets, self.opts = [], []
        for _ in data:
            net = (_opacus_copy(model) if name == "opacus-loop" else copy.deepcopy(model)).train()
            trainable = [p for p in net.parameters() if p.requires_grad]
            opt = torch.optim.Adam(trainable, lr=LR)
            if name == "opacus-loop":
                from opacus import GradSampleModule
                from opacus.optimizers import DPOptimizer

                net = GradSampleModule(net, loss_reduction="mean")
                opt = DPOptimizer(opt, noise_multiplier=NOISE, max_grad_norm=CLIP,
                                  expected_batch_size=batch, loss_reduction="mean")
            self.nets.append(net)
            self.opts.append(opt)

    def run(self, j: int) -> None:
        start = time.perf_counter()
        if self.name == "privfl-dp":
            from privfl.fl import put_rows, take_rows

            params, states, _ = self.trainer.train(
                take_rows(self.params, [j]), [self.data[j]], take_rows(self.states, [j]),
                self.gen)
            put_rows(self.params, [j], params)
            put_rows(self.states, [j], states)
        else:
            net, opt = self.nets[j], self.opts[j]
            x, y = self.data[j]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for _ in range(self.steps):
                    idx = torch.randperm(RECORDS, generator=self.gen)[: self.batch]
                    opt.zero_grad(set_to_none=True)
                    F.cross_entropy(net(x[idx]), y[idx]).backward()
                    opt.step()
                opt.zero_grad(set_to_none=True)
        self.seconds += time.perf_counter() - start
        self.client_steps += self.steps


def bench(key: str, clients: int, steps: int, batch: int, repeats: int) -> dict[str, float]:
    model, gen, vocab, seq, classes = _model(key)
    data = [(torch.randint(0, vocab, (RECORDS, seq), generator=gen),
             torch.randint(0, classes, (RECORDS,), generator=gen)) for _ in range(clients)]
    names = ("privfl-dp", "opacus-loop", "plain-loop")
    methods = [Method(name, model, data, steps, batch) for name in names]
    for m in methods:  # warm-up: one client each, not timed
        m.run(0)
        m.seconds, m.client_steps = 0.0, 0
    turn = 0
    for _ in range(repeats):
        for j in range(clients):
            for m in methods[turn % 3:] + methods[: turn % 3]:
                m.run(j)
            turn += 1
    speed = {m.name: m.client_steps / m.seconds for m in methods}
    print(f"\n{key}: {MODELS[key][0]}, V = {vocab}, T = {seq}, {clients} clients x K = {steps} "
          f"steps x {repeats} repeats, B = {batch}, n_j = {RECORDS}")
    print(f"{'method':<14}{'client-steps/s':>16}")
    for name, value in speed.items():
        print(f"{name:<14}{value:>16.2f}")
    print(f"privfl-dp / opacus-loop = {speed['privfl-dp'] / speed['opacus-loop']:6.2f}   "
          "(goal >= 3)")
    print(f"plain-loop / privfl-dp  = {speed['plain-loop'] / speed['privfl-dp']:6.2f}")
    return speed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=(*MODELS, "both"), default="both")
    parser.add_argument("--clients", type=int, default=4, help="clients (M)")
    parser.add_argument("--steps", type=int, default=4, help="local steps per client (K)")
    parser.add_argument("--batch-size", type=int, default=10, help="batch size B")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per method")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    import opacus

    print(f"torch {torch.__version__}, opacus {opacus.__version__}, {args.threads} thread(s), "
          f"{os.cpu_count()} CPUs, python {platform.python_version()}, load average at start "
          f"{os.getloadavg()[0]:.2f}")
    for key in (MODELS if args.model == "both" else (args.model,)):
        bench(key, args.clients, args.steps, args.batch_size, args.repeats)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
