"""privfl's ServerApp and ClientApp, and ``privfl run --backend flower`` on Flower's simulation.

* :func:`make_server_app` ``(start)``: a ``flwr.serverapp.ServerApp`` whose main function runs a
  privfl :class:`~privfl.runs.experiment.Experiment` (``start(context)`` makes it) with the
  :class:`~privfl.flower.backend.FlowerBackend` active: privfl's algorithm selects each round's
  cohort (secret Poisson or fixed-size sampling, as configured), sends each member's local work
  to its node, aggregates with its own server-side DP (clipping, noise from the secure source
  when ``privacy.secure``, division by the expected cohort size), stops before a round that
  would exceed the budget, accounts each completed round and writes the run directory.
* :func:`make_client_app` ``(config_text)``: a ``flwr.clientapp.ClientApp`` for a node that
  holds ONE privfl client (``node_config["partition-id"]``): on ``query`` it says which client
  and which configuration it holds; on ``train`` it runs privfl's engine
  (``trainer.train_streams``) on its own data with the seeds, start model, learning rate and
  optimizer state of the message (:mod:`privfl.flower.wire`), and replies with its trained model.
* :func:`simulate` ``(experiment, callbacks, workers)``: both apps on Flower's simulation
  runtime (``flwr.simulation.run_simulation``, Ray backend, ``workers`` actors of one CPU),
  one virtual SuperNode per client. Same configuration and seed, same models, metrics and
  privacy report as ``--backend local`` (tested).

Only ``privfl.flower`` imports ``flwr``, and only inside functions: privfl's core never does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from privfl._validation import check_int

__all__ = ["FLOWER_ALGORITHMS", "INSTALL_HINT", "NodeWork", "check_config", "check_options",
           "make_client_app", "make_server_app", "require_flower", "simulate", "start_run"]

INSTALL_HINT = "pip install 'privfl[flower]' (Flower 1.42, in its own virtual environment)"
#: the algorithms whose rounds fit Flower's message rounds (their local work goes through the
#: engine hook; PriFedSync's per-client models and Adam states travel in the messages)
FLOWER_ALGORITHMS = ("dp-fedavg", "insdp-fedavg", "insdp-fedsgd", "prifedsync")


def require_flower() -> Any:
    """The ``flwr`` module, or a one-line ValueError saying how to install it."""
    try:
        import flwr
    except ImportError:
        raise ValueError(f"--backend flower needs Flower: {INSTALL_HINT}") from None
    return flwr


def check_options(address: str | None = None, workers: int | None = None) -> None:
    """ValueError unless ``privfl run --backend flower`` can take these options (no
    ``--address``: the simulation runs here; ``workers`` >= 1) and Flower is installed."""
    if address is not None:
        raise ValueError(f"address = {address!r} is not allowed with backend 'flower': the "
                         "simulation runs on this machine (deploy with flwr run, "
                         "docs/flower.md)")
    if workers is not None:
        check_int("workers", workers, 1)
    require_flower()


def check_config(config: Any) -> None:
    """ValueError unless ``config`` can run on Flower: an algorithm of
    :data:`FLOWER_ALGORITHMS`, a dataset every node can build from the configuration (not
    ``custom``), training on the CPU."""
    algorithm = config.federated.algorithm
    if algorithm not in FLOWER_ALGORITHMS:
        raise ValueError(f"federated.algorithm = {algorithm!r} is not allowed with --backend "
                         f"flower: must be one of {', '.join(FLOWER_ALGORITHMS)}")
    if config.data.dataset == "custom":
        raise ValueError("data.dataset = 'custom' is not allowed with --backend flower: every "
                         "node builds its own partition from the configuration")
    if config.run.device != "cpu":
        raise ValueError(f"run.device = {config.run.device!r} is not allowed with --backend "
                         "flower: the nodes train on the CPU")


class NodeWork:
    """What one node holds: its configuration and, once built, a trainer and its own client's
    data (:class:`~privfl.backends.base.ShardWorker` over that one client)."""

    def __init__(self, config_text: str, client: int) -> None:
        import yaml

        from privfl.config import config_from_dict
        from privfl.config.algorithms import register_builtin_algorithms
        from privfl.flower.wire import config_digest

        # here, in the node's own process: Flower's simulation runs the ClientApp in Ray actors,
        # whose fresh registry make_client_app's call (in the driver) never reached
        register_builtin_algorithms()
        self.config = config_from_dict(yaml.safe_load(config_text))
        check_config(self.config)
        self.client = check_int("partition-id", client, 0, self.config.data.clients - 1)
        self.digest = config_digest(config_text)
        self._worker: Any = None

    def worker(self) -> Any:
        """The node's engine: the algorithm's trainer settings and its client's data, built
        from the configuration exactly as the server builds them (once per process)."""
        if self._worker is None:
            from privfl.backends.base import ShardWorker

            settings, train = _built(self.digest, self.config)
            self._worker = ShardWorker(settings, [train[self.client]])
        return self._worker

    def train(self, call: dict[str, Any], start_row: Any) -> tuple:
        """One client's work (its index mapped to row 0 of this node's data)."""
        if call["clients"] != [self.client] or call["rows"] != 1:
            raise ValueError(f"work for clients {call['clients']} reached the node holding "
                             f"client {self.client}")
        return self.worker().train({**call, "clients": [0]}, start_row)


_NODES: dict[tuple[str, int], NodeWork] = {}
_BUILT: dict[str, tuple[dict[str, Any], list]] = {}


def _built(digest: str, config: Any) -> tuple[dict[str, Any], list]:
    """The trainer settings and every client's training pair of a configuration, built once
    per process (a simulation's actor serves many virtual nodes)."""
    if digest not in _BUILT:
        from privfl.algorithms.builders import build_algorithm, build_dataset
        from privfl.backends.base import trainer_settings

        algorithm = build_algorithm(config, build_dataset(config))
        settings = trainer_settings(algorithm.trainer)
        settings["options"]["workers"] = 1
        _BUILT.clear()  # one configuration at a time
        _BUILT[digest] = (settings, list(algorithm.tensors.train))
    return _BUILT[digest]


def _node(config_text: str, context: Any) -> NodeWork:
    client = int(context.node_config["partition-id"])
    key = (config_text, client)
    if key not in _NODES:
        _NODES[key] = NodeWork(config_text, client)
    return _NODES[key]


def make_client_app(config_text: str | Callable[[Any], str]) -> Any:
    """privfl's ClientApp for ``config_text`` (the run's ``dump_config`` YAML), or for the text
    a function of the node's ``Context`` returns (a deployed app reads it from its run
    config)."""
    from flwr.app import ConfigRecord, Message, RecordDict
    from flwr.clientapp import ClientApp

    from privfl.flower.wire import REGISTER, decode_call, encode_reply

    text_of = config_text if callable(config_text) else (lambda context: config_text)
    app = ClientApp()

    @app.query()
    def query(message: Any, context: Any) -> Any:
        node = _node(text_of(context), context)
        return Message(RecordDict({REGISTER: ConfigRecord(
            {"client": node.client, "digest": node.digest})}), reply_to=message)

    @app.train()
    def train(message: Any, context: Any) -> Any:
        node = _node(text_of(context), context)
        call, start_row, number, digest = decode_call(message.content)
        if digest != node.digest:
            raise ValueError("the work was sent for another configuration")
        result = node.train(call, start_row)
        return Message(encode_reply(result, client=node.client, number=number),
                       reply_to=message)

    return app


def make_server_app(start: Callable[[Any], Any], callbacks: Any = None, *,
                    outcome: dict[str, Any] | None = None, timeout: float = 600.0) -> Any:
    """privfl's ServerApp: its main function calls ``start(context)`` (an ``Experiment``,
    created or resumed; ``context``: Flower's, e.g. its ``run_config``) and runs it with the
    :class:`~privfl.flower.backend.FlowerBackend` over the
    app's grid. ``outcome`` (optional) receives ``result`` or ``error`` and ``backend``."""
    from flwr.serverapp import ServerApp

    from privfl.backends import use_backend
    from privfl.config import dump_config
    from privfl.flower.backend import FlowerBackend
    from privfl.flower.wire import config_digest

    app = ServerApp()
    outcome = {} if outcome is None else outcome

    @app.main()
    def main(grid: Any, context: Any) -> None:
        try:
            experiment = start(context)
            outcome["experiment"] = experiment
            config = experiment.config
            check_config(config)
            backend = FlowerBackend(grid, config_digest(dump_config(config)),
                                    config.data.clients, timeout=timeout)
            outcome["backend"] = backend
            with use_backend(backend):
                outcome["result"] = experiment.run(callbacks)
        except BaseException as error:  # handed to the caller's thread (simulate)
            outcome["error"] = error
            if not outcome.get("keep_error"):
                raise

    return app


def start_run(config_text: str, out: str) -> Any:
    """The Experiment of a deployed app: a new run of ``config_text`` in ``out``, or the run
    already there resumed from its last checkpoint (a ServerApp started again)."""
    from pathlib import Path

    import yaml

    from privfl.config import config_from_dict
    from privfl.runs.experiment import Experiment

    if (Path(out) / "run.json").exists():
        return Experiment.resume(out)
    return Experiment.create(config_from_dict(yaml.safe_load(config_text)), out)


def simulate(experiment: Any, callbacks: Any = None, workers: int | None = None) -> Any:
    """Run ``experiment`` (created or resumed) with privfl's apps on Flower's simulation
    runtime: one virtual SuperNode per client, ``workers`` Ray actors of one CPU each
    (default: this machine's cores). Returns the run's ``ExperimentResult``; an error of the
    run is raised here, one line."""
    require_flower()
    check_config(experiment.config)
    from flwr.simulation import run_simulation

    from privfl.config import dump_config
    from privfl.fl.workers import available_cores

    workers = available_cores() if workers is None else check_int("workers", workers, 1)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    outcome: dict[str, Any] = {"keep_error": True}
    server = make_server_app(lambda context: experiment, callbacks, outcome=outcome)
    client = make_client_app(dump_config(experiment.config))
    run_simulation(
        server_app=server, client_app=client, num_supernodes=experiment.config.data.clients,
        backend_name="ray",
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                        "init_args": {"num_cpus": workers, "include_dashboard": False,
                                      "object_store_memory": 2**30,
                                      "_node_ip_address": "127.0.0.1"}})
    if "error" in outcome:
        raise outcome["error"]
    if "result" not in outcome:
        raise RuntimeError("the Flower simulation ended before privfl's ServerApp finished")
    return outcome["result"]
