"""Start a model from a saved state dict (``model.init_from: PATH.pt``), shapes checked.

Xie et al. 2023 fine-tune CIFAR-10 from a model pretrained (non-privately) on CIFAR-100. The
file is read with ``torch.load(weights_only=True)`` (tensors only, no code runs) and holds a
state dict (``model.state_dict()``, or ``{"state_dict": ...}``). Every entry of the model's
state dict must be in the file with the same shape and no entry may be left over; a mismatch
is a ``ValueError`` naming the entry and both shapes. The **head** (the last ``nn.Linear``,
the layer whose size is the class count) is started fresh from the model's own seeded
initialisation only when ``replace_head=True``: a 100-class CIFAR-100 head is never silently
dropped. The differential-privacy guarantee protects the federated clients' data only; the
starting model is a function of the pretraining data, so the guarantee means what it says
only if that data is public (the card row of :func:`privfl.runs.model_card.model_card_rows`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

__all__ = ["Pretrained", "head_names", "load_pretrained"]


@dataclass(frozen=True)
class Pretrained:
    """Where a model started: the file, its SHA-256 and the entries started fresh."""

    path: str
    sha256: str
    replaced: tuple[str, ...]


def head_names(model: nn.Module) -> tuple[str, ...]:
    """The state-dict entries of the model's last ``nn.Linear`` (its output layer)."""
    last = None
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            last = name
    if last is None:
        return ()
    return tuple(f"{last}.{key}" for key in model.get_submodule(last).state_dict())


def _read(path: Path) -> Mapping[str, torch.Tensor]:
    try:
        content = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # pickle errors, unsafe globals, truncated zip ...
        raise ValueError(f"model.init_from = {str(path)!r} is not a readable state dict file "
                         f"({type(error).__name__}: {error})") from None
    if isinstance(content, Mapping) and isinstance(content.get("state_dict"), Mapping):
        content = content["state_dict"]
    if not isinstance(content, Mapping) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in content.items()):
        raise ValueError(f"model.init_from = {str(path)!r} holds {type(content).__name__}: must "
                         "be a state dict (parameter name -> tensor), e.g. torch.save("
                         "model.state_dict(), PATH)")
    return content


def load_pretrained(model: nn.Module, path: str | os.PathLike, *,
                    replace_head: bool = False) -> Pretrained:
    """Copy the state dict at ``path`` into ``model`` (in place; see the module docstring)."""
    if not isinstance(replace_head, bool):
        raise ValueError(f"replace_head = {replace_head!r} is not allowed: must be true or false")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model.init_from = {str(path)!r}: no such file")
    saved = _read(path)
    own = model.state_dict()
    head = set(head_names(model)) if replace_head else set()
    extra = sorted(set(saved) - set(own) - head)
    missing = sorted(set(own) - set(saved) - head)
    if missing or extra:
        raise ValueError(
            f"model.init_from = {str(path)!r} does not fit model {type(model).__name__}: "
            f"missing {missing[:5]}, unexpected {extra[:5]} (entries of model.state_dict())")
    for name, value in own.items():
        if name in head:
            continue
        got = saved[name]
        if tuple(got.shape) != tuple(value.shape):
            hint = ("; it is the output layer: set model.replace_head: true to start it fresh "
                    "for this data's classes" if name in head_names(model) else "")
            raise ValueError(
                f"model.init_from = {str(path)!r}: parameter {name!r} has shape "
                f"{tuple(got.shape)} in the file, the model has {tuple(value.shape)}{hint}")
        if got.is_floating_point() and not bool(torch.isfinite(got).all()):
            raise ValueError(f"model.init_from = {str(path)!r}: parameter {name!r} holds NaN or "
                             "inf values")
    with torch.no_grad():
        for name, value in own.items():
            if name not in head:
                value.copy_(saved[name])
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Pretrained(str(path), digest, tuple(sorted(head)))
