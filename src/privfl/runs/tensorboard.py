"""Per-round metrics as TensorBoard event files (``run.tensorboard: true``), next to
metrics.jsonl: ``DIR/tensorboard/events.out.tfevents.*``, written by PyTorch's standard
``torch.utils.tensorboard.SummaryWriter`` (needs the ``tensorboard`` package: ``pip install
'privfl[tensorboard]'``). View with ``tensorboard --logdir DIR/tensorboard``.

Every finite number of a round's metrics is a scalar at step = round (``privacy`` entries as
``privacy/<method>-<kind>[-<scope>]/epsilon``). On resume the writer purges the steps after the
checkpoint (``purge_step``), so TensorBoard shows each round once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["TensorBoardLog", "check_available", "scalars"]


def check_available() -> None:
    """A ValueError naming ``run.tensorboard`` and the install command if it cannot work."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        raise ValueError("run.tensorboard = true needs the tensorboard package: pip install "
                         "'privfl[tensorboard]' (or set run.tensorboard: false)") from None


def scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of one round's metrics, by TensorBoard tag."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if key == "round":
            continue
        if key == "privacy" and isinstance(value, list):
            for entry in value:
                tag = "-".join(str(entry[k]) for k in ("method", "kind", "scope")
                               if entry.get(k))
                for name in ("epsilon", "mu"):
                    number = entry.get(name)
                    if isinstance(number, (int, float)) and math.isfinite(number):
                        out[f"privacy/{tag}/{name}"] = float(number)
        elif (isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value)):
            out[key] = float(value)
    return out


class TensorBoardLog:
    """Writes each round's :func:`scalars` to ``path`` (steps after ``purge_step`` dropped)."""

    def __init__(self, path: Path, purge_step: int | None = None) -> None:
        check_available()
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(path), purge_step=purge_step)

    def log(self, metrics: Mapping[str, Any]) -> None:
        step = int(metrics["round"])
        for tag, value in scalars(metrics).items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
