"""An in-process stand-in for a Flower ``Grid``: every node is a privfl NodeWork (the
ClientApp's own handler code), replies are built with the same wire functions; hooks drop or
corrupt replies to test the server's fail-closed checks without starting Flower's runtime."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from privfl.config import dump_config
from privfl.flower.apps import NodeWork
from privfl.flower.wire import REGISTER, decode_call, encode_reply


@dataclass
class Metadata:
    src_node_id: int


@dataclass
class Reply:
    """Duck-typed reply message (what FlowerBackend reads of a flwr Message)."""

    src: int
    body: Any = None
    failure: Any = None
    metadata: Metadata = field(init=False)

    def __post_init__(self) -> None:
        self.metadata = Metadata(self.src)

    def has_error(self) -> bool:
        return self.failure is not None

    @property
    def content(self) -> Any:
        return self.body

    @property
    def error(self) -> Any:
        return self.failure


class LocalGrid:
    """Nodes ``1000 + j`` hold client j of ``config``. ``tamper(node, call, reply)`` may
    return None (dropped) or another reply."""

    def __init__(self, config: Any, tamper=None) -> None:
        from flwr.supercore.task_identity import TaskIdentity

        # outside a Flower runtime, a Message needs the identity the runtime would set
        for key in ("run_id", "node_id", "task_id"):
            if getattr(TaskIdentity, f"_{key}") is None:
                setattr(TaskIdentity, key, 1)
        text = dump_config(config)
        self.nodes = {1000 + j: NodeWork(text, j) for j in range(config.data.clients)}
        self.tamper = tamper
        self.sent = 0

    def get_node_ids(self):
        return list(self.nodes)

    def send_and_receive(self, messages, *, timeout=None):
        from flwr.app import ConfigRecord, RecordDict

        replies = []
        for message in messages:
            node = self.nodes[message.metadata.dst_node_id]
            src = message.metadata.dst_node_id
            if message.metadata.message_type == "query":
                replies.append(Reply(src, RecordDict({REGISTER: ConfigRecord(
                    {"client": node.client, "digest": node.digest})})))
                continue
            self.sent += 1
            call, start_row, number, _ = decode_call(message.content)
            reply = Reply(src, encode_reply(node.train(call, start_row), client=node.client,
                                            number=number))
            if self.tamper is not None:
                reply = self.tamper(src, number, reply)
            if reply is not None:
                replies.append(reply)
        return replies
