"""What travels in a Flower message between privfl's ServerApp and its ClientApps, and the
server's fail-closed check of every reply.

A work message (``message_type`` ``"train"``) carries one shard of an engine call
(:func:`privfl.backends.base.shard_call`) for ONE client, i.e. exactly what a Ray worker gets:

* ``ConfigRecord "privfl.call"``: ``client`` (the privfl client index), ``call`` (a sequence
  number that the reply must echo), ``rows`` (1), ``keep_states``, ``digest`` (of the run's
  configuration: a node built from another configuration refuses the work);
* ``ArrayRecord "privfl.inputs"``: ``start`` (the client's flat start model ``[1, d]``, or the
  call's one start row ``[d]``), ``seeds`` (``[1, 2 + S]`` int64 ``ClientStreams`` seeds drawn
  on the server exactly as ``trainer.train`` draws them), ``lr`` when it is per row, and
  ``state.KEY`` for the optimizer state rows the algorithm keeps.

The reply carries ``ConfigRecord "privfl.reply"`` (``client``, ``call``, the statistics'
layout fields, ``seconds``) and ``ArrayRecord "privfl.result"`` (``flat``, ``state.KEY``,
``stats.KEY``).

:func:`decode_reply` is fail-closed: a reply that is not exactly the expected shape, dtype,
client and call, or whose trained model or optimizer state is not finite, raises
:class:`ReplyError`; the round is then not aggregated (``docs/flower.md``, "Faults").
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from privfl.fl.trainer import TrainingStats

__all__ = ["CALL", "INPUTS", "REGISTER", "REPLY", "RESULT", "ReplyError", "config_digest",
           "decode_call", "decode_reply", "encode_call", "encode_reply"]

CALL, INPUTS, REPLY, RESULT, REGISTER = (
    "privfl.call", "privfl.inputs", "privfl.reply", "privfl.result", "privfl.node")
_STATS = ("batch_sizes", "loss", "clipped_fraction", "mean_grad_norm")


class ReplyError(ValueError):
    """A client's reply was missing, an error, or malformed / out of range: the round is not
    aggregated and nothing of it is released (fail-closed)."""


def config_digest(config_text: str) -> str:
    """SHA-256 of the run's configuration (``dump_config``): server and nodes must agree."""
    return hashlib.sha256(config_text.encode()).hexdigest()


def _array(tensor: torch.Tensor) -> Any:
    from flwr.app import Array

    return Array(np.ascontiguousarray(tensor.detach().cpu().numpy()))


def _tensor(array: Any) -> torch.Tensor:
    return torch.from_numpy(np.array(array.numpy()))


def encode_call(call: Mapping[str, Any], start_row: torch.Tensor | None, *, number: int,
                digest: str) -> Any:
    """The RecordDict of one client's work (``call``: :func:`~privfl.backends.base.shard_call`
    of a one-client shard)."""
    from flwr.app import ArrayRecord, ConfigRecord, RecordDict

    arrays = ArrayRecord()
    arrays["start"] = _array(call["start"] if call["start"] is not None else start_row)
    arrays["seeds"] = _array(call["seeds"])
    lr = call["lr"]
    if isinstance(lr, torch.Tensor):
        arrays["lr"] = _array(lr)
    for key, value in (call["states"] or {}).items():
        arrays[f"state.{key}"] = _array(value)
    config = ConfigRecord({
        "client": int(call["clients"][0]), "call": int(number), "rows": int(call["rows"]),
        "keep_states": bool(call["keep_states"]), "digest": digest,
        "has_states": call["states"] is not None, "one_start": call["start"] is None,
        "lr": float(lr) if isinstance(lr, (int, float)) else "row" if lr is not None else "",
    })
    return RecordDict({CALL: config, INPUTS: arrays})


def decode_call(content: Any) -> tuple[dict[str, Any], torch.Tensor | None, int, str]:
    """``(call, start_row, call number, digest)`` of a work message (client side)."""
    config, arrays = content[CALL], content[INPUTS]
    start = _tensor(arrays["start"])
    lr: Any = config["lr"]
    lr = _tensor(arrays["lr"]) if lr == "row" else None if lr == "" else float(lr)
    states = None
    if config["has_states"]:
        states = {k[len("state."):]: _tensor(v) for k, v in arrays.items()
                  if k.startswith("state.")}
    call = {"clients": [int(config["client"])], "rows": int(config["rows"]),
            "start": None if config["one_start"] else start, "states": states,
            "seeds": _tensor(arrays["seeds"]), "lr": lr,
            "keep_states": bool(config["keep_states"])}
    return call, start if config["one_start"] else None, int(config["call"]), str(
        config["digest"])


def encode_reply(result: tuple, *, client: int, number: int) -> Any:
    """The RecordDict of a client's result ``(flat, states, stats, seconds)``."""
    from flwr.app import ArrayRecord, ConfigRecord, RecordDict

    flat, states, stats, seconds = result
    arrays = ArrayRecord()
    arrays["flat"] = _array(flat)
    for key, value in (states or {}).items():
        arrays[f"state.{key}"] = _array(value)
    for key in _STATS:
        arrays[f"stats.{key}"] = _array(getattr(stats, key))
    config = ConfigRecord({
        "client": int(client), "call": int(number), "has_states": states is not None,
        "layout": stats.layout, "chunk_size": int(stats.chunk_size),
        "per_example": stats.per_example, "workers": int(stats.workers),
        "seconds": float(seconds)})
    return RecordDict({REPLY: config, RESULT: arrays})


def decode_reply(message: Any, *, client: int, number: int, rows: int, dim: int,
                 dtype: torch.dtype, optimizer: Any, keep_states: bool) -> tuple:
    """``(flat, states, stats, seconds)`` of a reply, or :class:`ReplyError` (fail-closed).

    Checked: no error and both records present; ``client`` and ``call`` echo the request;
    ``flat`` is ``[rows, dim]`` of the trainer's dtype and finite; with ``keep_states`` the
    optimizer states have exactly the optimizer's keys and shapes (``optimizer.check_state``)
    and are finite; the statistics have one row per client. The training loss may be NaN
    (the runner warns about divergence); nothing else may be.
    """
    where = f"client {client}'s reply to call {number}"
    if message.has_error():
        error = message.error
        raise ReplyError(f"{where} is an error (code {error.code}): "
                         f"{' '.join(str(error.reason).split())[:300]}")
    content = message.content
    try:
        config, arrays = content[REPLY], content[RESULT]
        echo = (int(config["client"]), int(config["call"]))
        flat = _tensor(arrays["flat"])
        stats = TrainingStats(
            **{key: _tensor(arrays[f"stats.{key}"]) for key in _STATS},
            layout=str(config["layout"]), chunk_size=int(config["chunk_size"]),
            per_example=str(config["per_example"]), workers=int(config["workers"]))
        states = ({k[len("state."):]: _tensor(v) for k, v in arrays.items()
                   if k.startswith("state.")} if config["has_states"] else None)
        seconds = float(config["seconds"])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ReplyError(f"{where} is malformed: {type(error).__name__}: {error}") from None
    if echo != (client, number):
        raise ReplyError(f"{where} answers client {echo[0]}, call {echo[1]}: must echo the "
                         "request (a stale or misrouted reply)")
    if flat.dtype != dtype or tuple(flat.shape) != (rows, dim):
        raise ReplyError(f"{where} has a model of shape {tuple(flat.shape)} and dtype "
                         f"{flat.dtype}: must be ({rows}, {dim}) {dtype}")
    if not bool(torch.isfinite(flat).all()):
        raise ReplyError(f"{where} has a non-finite model: out of range")
    if keep_states:
        if states is None:
            raise ReplyError(f"{where} has no optimizer states: they were asked for")
        try:
            optimizer.check_state(states, rows, dim, name="states")
        except ValueError as error:
            raise ReplyError(f"{where} is malformed: {error}") from None
        if not all(bool(torch.isfinite(v.double()).all()) for v in states.values()):
            raise ReplyError(f"{where} has a non-finite optimizer state: out of range")
    else:
        states = None
    for key in _STATS:
        value = getattr(stats, key)
        if value.dim() == 0 or value.shape[0] != rows:
            raise ReplyError(f"{where} has statistics {key} of shape {tuple(value.shape)}: "
                             f"must have {rows} row(s)")
    if not math.isfinite(seconds) or seconds < 0:
        raise ReplyError(f"{where} has seconds = {seconds!r}: must be finite and >= 0")
    return flat, states, stats, seconds
