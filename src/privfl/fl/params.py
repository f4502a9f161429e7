"""Stacked parameters: ``dict name -> tensor [M, *shape]``, one row per client (or replica).

The round engine keeps the models of a cohort as one stacked dictionary (the names are those of
``model.named_parameters()``, trainable ones only) so that per-client work can be batched.
Helpers here convert between torch models / state dicts and stacked dictionaries and pick,
overwrite or concatenate rows (also for optimizer states, which use the same leading dimension):
``take_rows`` cuts a cohort into shards, ``cat_rows`` puts the shards' results back together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from privfl._validation import check_int

__all__ = [
    "cat_rows",
    "load_params",
    "num_stacked",
    "put_rows",
    "replicate_params",
    "stack_params",
    "take_rows",
    "trainable_parameters",
    "unstack_params",
]


def trainable_parameters(model: nn.Module) -> dict[str, torch.Tensor]:
    """``name -> parameter`` for every parameter with ``requires_grad`` (detached views)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model = {type(model).__name__} is not allowed: must be a torch Module")
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def _as_params(source: object, j: int) -> Mapping[str, torch.Tensor]:
    if isinstance(source, nn.Module):
        return trainable_parameters(source)
    if isinstance(source, Mapping):
        return source
    raise ValueError(
        f"sources[{j}] = {type(source).__name__} is not allowed: must be a torch Module or a "
        "mapping name -> tensor"
    )


def stack_params(sources: Sequence[nn.Module | Mapping[str, torch.Tensor]]) -> dict:
    """Stack models (their trainable parameters) or parameter dicts into ``name -> [M, ...]``.

    All sources must have the same names and shapes. The result is a new copy.
    """
    if isinstance(sources, (nn.Module, Mapping)) or len(sources) == 0:
        raise ValueError("sources must be a non-empty sequence of models or parameter dicts")
    dicts = [_as_params(s, j) for j, s in enumerate(sources)]
    names = list(dicts[0])
    for j, d in enumerate(dicts[1:], start=1):
        if list(d) != names:
            raise ValueError(
                f"sources[{j}] has parameters {sorted(d)}: must match sources[0] {sorted(names)}"
            )
        for name in names:
            if d[name].shape != dicts[0][name].shape:
                raise ValueError(
                    f"sources[{j}][{name!r}] has shape {tuple(d[name].shape)}: must match "
                    f"sources[0] {tuple(dicts[0][name].shape)}"
                )
    return {name: torch.stack([d[name].detach() for d in dicts]) for name in names}


def replicate_params(source: nn.Module | Mapping[str, torch.Tensor], count: int) -> dict:
    """``count`` copies of one model's trainable parameters, stacked (a new tensor per name)."""
    count = check_int("count", count, minimum=1)
    params = _as_params(source, 0)
    return {
        name: p.detach().unsqueeze(0).expand(count, *p.shape).clone()
        for name, p in params.items()
    }


def num_stacked(stacked: Mapping[str, torch.Tensor], name: str = "stacked") -> int:
    """The common leading dimension M of a stacked dictionary (checked)."""
    if not isinstance(stacked, Mapping) or not stacked:
        raise ValueError(f"{name} must be a non-empty mapping name -> tensor [M, ...]")
    sizes = set()
    for key, t in stacked.items():
        if not isinstance(t, torch.Tensor) or t.dim() < 1:
            raise ValueError(f"{name}[{key!r}] is not a tensor with a leading client dimension")
        sizes.add(t.shape[0])
    if len(sizes) != 1:
        raise ValueError(f"{name} has leading dimensions {sorted(sizes)}: must all be equal")
    return sizes.pop()


def unstack_params(stacked: Mapping[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """The inverse of :func:`stack_params`: one ``name -> tensor`` dict per row (views)."""
    count = num_stacked(stacked)
    return [{name: t[j] for name, t in stacked.items()} for j in range(count)]


def load_params(model: nn.Module, stacked: Mapping[str, torch.Tensor], index: int = 0) -> nn.Module:
    """Copy row ``index`` of ``stacked`` into ``model``'s parameters (in place); returns model."""
    count = num_stacked(stacked)
    index = check_int("index", index, minimum=0)
    if index >= count:
        raise ValueError(f"index = {index} is out of range: must be in [0, {count - 1}]")
    params = dict(model.named_parameters())
    missing = [name for name in stacked if name not in params]
    if missing:
        raise ValueError(f"stacked holds parameters {missing} that model does not have")
    with torch.no_grad():
        for name, t in stacked.items():
            if params[name].shape != t.shape[1:]:
                raise ValueError(
                    f"stacked[{name!r}] has row shape {tuple(t.shape[1:])}: model has "
                    f"{tuple(params[name].shape)}"
                )
            params[name].copy_(t[index])
    return model


def _index(index: object, count: int) -> torch.Tensor:
    idx = torch.as_tensor(index, dtype=torch.int64).flatten()
    if idx.numel() and (idx.min() < 0 or idx.max() >= count):
        raise ValueError(f"index = {index!r} is out of range: must be in [0, {count - 1}]")
    return idx


def take_rows(tree: Mapping[str, torch.Tensor], index) -> dict[str, torch.Tensor]:
    """Rows ``index`` (ints) of every tensor in a stacked dict (params or optimizer state)."""
    count = num_stacked(tree, "tree")
    idx = _index(index, count)
    return {name: t[idx.to(t.device)] for name, t in tree.items()}


def put_rows(
    tree: Mapping[str, torch.Tensor], index, values: Mapping[str, torch.Tensor]
) -> Mapping[str, torch.Tensor]:
    """Write ``values`` (stacked, one row per entry of ``index``) into rows of ``tree`` in place."""
    count = num_stacked(tree, "tree")
    idx = _index(index, count)
    if set(values) != set(tree):
        raise ValueError(f"values has keys {sorted(values)}: must match tree {sorted(tree)}")
    with torch.no_grad():
        for name, t in tree.items():
            v = values[name]
            if v.shape != (idx.numel(), *t.shape[1:]):
                raise ValueError(
                    f"values[{name!r}] has shape {tuple(v.shape)}: must be "
                    f"{(idx.numel(), *t.shape[1:])}"
                )
            t[idx.to(t.device)] = v.to(device=t.device, dtype=t.dtype)
    return tree


def cat_rows(trees: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The rows of several stacked dicts (params or optimizer states) in order: a new dict
    ``name -> cat([tree[name] for tree in trees])`` (e.g. the shards of a cohort put back)."""
    if isinstance(trees, Mapping) or not isinstance(trees, Sequence) or not trees:
        raise ValueError("trees must be a non-empty sequence of stacked dicts")
    for j, tree in enumerate(trees):
        num_stacked(tree, f"trees[{j}]")
        if set(tree) != set(trees[0]):
            raise ValueError(
                f"trees[{j}] has keys {sorted(tree)}: must match trees[0] {sorted(trees[0])}"
            )
        for name, t in tree.items():
            if t.shape[1:] != trees[0][name].shape[1:]:
                raise ValueError(
                    f"trees[{j}][{name!r}] has row shape {tuple(t.shape[1:])}: trees[0] has "
                    f"{tuple(trees[0][name].shape[1:])}"
                )
    return {name: torch.cat([tree[name] for tree in trees]) for name in trees[0]}
