"""The Flower backend: every client of an engine call is one Flower message to the SuperNode
that holds that client, sent through the ServerApp's ``Grid``.

:class:`FlowerBackend` is a :class:`~privfl.backends.base.ShardedBackend` cut into one shard
per client (row): the per-client ``ClientStreams`` seeds are drawn on the server from the
algorithm's generator exactly as ``trainer.train`` draws them, and travel in the message
(:mod:`privfl.flower.wire`) with the client's start model, learning rate and optimizer state.
The node runs ``trainer.train_streams`` on its own data (:mod:`privfl.flower.apps`); a row's
result is a pure function of those inputs (``docs/engine.md``, "Engine seams"), so the server
gets the rows a local run computes, bit for bit (``docs/ray.md`` does the same with Ray
actors). Everything else - the cohort's selection, clipping, noise, division by the expected
cohort size, budget stops, accounting, the run directory - stays in privfl's algorithm and
runner on the server.

Fail-closed faults: a node that does not answer within ``timeout`` or answers with an error is
asked again with the same inputs (at most ``max_retries`` times; the answer cannot differ); a
reply that is malformed or out of range (:func:`~privfl.flower.wire.decode_reply`), or a node
that still fails after the retries, raises :class:`~privfl.flower.wire.ReplyError` BEFORE the
round is aggregated: nothing of the round is released, the accountant has not counted it, and
``privfl run --resume DIR`` continues from the last checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from privfl._validation import check_int, check_positive
from privfl.backends.base import ShardedBackend, shard_call
from privfl.flower.wire import (
    REGISTER,
    ReplyError,
    decode_reply,
    encode_call,
)

__all__ = ["FlowerBackend", "register_nodes"]

#: one shard per row (shard_bounds never cuts more pieces than rows)
_ONE_PER_ROW = 2**31 - 1


def register_nodes(grid: Any, digest: str, clients: int, *, timeout: float = 300.0) -> dict:
    """``{privfl client index: node id}``: asks every node of ``grid`` (a ``"query"``
    message) which partition it holds and from which configuration; waits up to ``timeout``
    seconds for ``clients`` nodes. ValueError unless every client 0..clients-1 is held by
    exactly one node built from the same configuration (``digest``)."""
    from flwr.app import ConfigRecord, Message, RecordDict

    clients = check_int("clients", clients, 1)
    deadline = time.monotonic() + check_positive("timeout", timeout)
    nodes = list(grid.get_node_ids())
    while len(nodes) < clients and time.monotonic() < deadline:
        time.sleep(0.5)
        nodes = list(grid.get_node_ids())
    if len(nodes) != clients:
        raise ValueError(f"the Flower federation has {len(nodes)} node(s): privfl needs one "
                         f"node per client, data.clients = {clients}")
    messages = [Message(RecordDict({REGISTER: ConfigRecord({"digest": digest})}),
                        dst_node_id=node, message_type="query") for node in nodes]
    replies = list(grid.send_and_receive(messages, timeout=max(1.0, deadline -
                                                               time.monotonic())))
    held: dict[int, int] = {}
    for reply in replies:
        node = reply.metadata.src_node_id
        if reply.has_error():
            raise ValueError(f"node {node} refused to register: {reply.error.reason}")
        answer = reply.content[REGISTER]
        if answer["digest"] != digest:
            raise ValueError(f"node {node} was built from another configuration (digest "
                             f"{str(answer['digest'])[:12]}, the server's {digest[:12]})")
        client = int(answer["client"])
        if not 0 <= client < clients or client in held:
            raise ValueError(f"node {node} holds partition-id {client}: must be a distinct "
                             f"value in 0..{clients - 1}")
        held[client] = node
    if len(held) != clients:
        missing = sorted(set(range(clients)) - set(held))[:10]
        raise ValueError(f"{clients - len(held)} client(s) have no registered node (e.g. "
                         f"{missing}): every node must answer within {timeout:g} s")
    return held


class FlowerBackend(ShardedBackend):
    """Runs each client's local work on the Flower node that holds it (module docstring).

    Parameters
    ----------
    grid
        The ServerApp's ``flwr.serverapp.Grid``.
    digest
        :func:`~privfl.flower.wire.config_digest` of the run's configuration.
    clients
        ``data.clients``: the federation must have one node per client.
    timeout
        Seconds to wait for a call's replies before asking the silent nodes again.
    max_retries
        How often a silent or failed node is asked again in one call before the round
        fails (closed).
    """

    name = "flower"

    def __init__(self, grid: Any, digest: str, clients: int, *, timeout: float = 600.0,
                 max_retries: int = 2) -> None:
        super().__init__()
        self.grid = grid
        self.digest = str(digest)
        self.clients = check_int("clients", clients, 1)
        self.timeout = check_positive("timeout", timeout)
        self.max_retries = check_int("max_retries", max_retries, 0)
        self.nodes: dict[int, int] | None = None
        self.calls = 0  #: work messages' sequence numbers (echoed by the replies)
        self.retried = 0  #: silent or failed nodes asked again

    @property
    def shards(self) -> int:
        return _ONE_PER_ROW

    def describe(self) -> str:
        return f"flower ({self.clients} node(s), one per client)"

    def run_shards(self, trainer, data: Sequence, start_row: torch.Tensor | None,
                   shards: list, keep_states: bool, count: int) -> list[tuple]:
        if len(data) != self.clients:
            raise ValueError(f"data has {len(data)} clients: the federation was registered "
                             f"for {self.clients}")
        if self.nodes is None:
            self.nodes = register_nodes(self.grid, self.digest, self.clients,
                                        timeout=self.timeout)
        results: dict[int, tuple] = {}
        pending = list(shards)
        while pending:  # a client twice in one call (replica rows) goes in a later batch
            batch, seen, later = [], set(), []
            for shard in pending:
                (later if shard.clients[0] in seen else batch).append(shard)
                seen.add(shard.clients[0])
            self._run_batch(trainer, start_row, batch, keep_states, results)
            pending = later
            if trainer.progress is not None:
                trainer.progress(len(results), count)
        return [results[s.index] for s in shards]

    def _run_batch(self, trainer, start_row, batch: list, keep_states: bool,
                   results: dict[int, tuple]) -> None:
        from flwr.app import Message

        numbers = {}
        for shard in batch:
            self.calls += 1
            numbers[shard.index] = self.calls
        todo = {self.nodes[s.clients[0]]: s for s in batch}
        failures = dict.fromkeys(todo, 0)
        while todo:
            messages = [Message(encode_call(shard_call(s, keep_states), start_row,
                                            number=numbers[s.index], digest=self.digest),
                                dst_node_id=node, message_type="train")
                        for node, s in todo.items()]
            replies = {r.metadata.src_node_id: r for r in
                       self.grid.send_and_receive(messages, timeout=self.timeout)}
            for node, shard in list(todo.items()):
                reply = replies.get(node)
                if reply is None or reply.has_error():
                    failures[node] += 1
                    if failures[node] > self.max_retries:
                        why = ("did not answer" if reply is None else
                               f"failed: {' '.join(str(reply.error.reason).split())[:200]}")
                        raise ReplyError(
                            f"client {shard.clients[0]} (node {node}) {why} {failures[node]} "
                            f"time(s) in one call (max_retries = {self.max_retries}): the "
                            "round was not aggregated and nothing of it was released; "
                            "continue with privfl run --resume DIR")
                    self.retried += 1
                    continue
                results[shard.index] = decode_reply(
                    reply, client=shard.clients[0], number=numbers[shard.index],
                    rows=shard.hi - shard.lo, dim=trainer.num_params, dtype=trainer.dtype,
                    optimizer=trainer.optimizer, keep_states=keep_states)
                del todo[node]
