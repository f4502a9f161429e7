"""LEAF JSON splits (FEMNIST, Sent140, Shakespeare, ...; Caldas et al. 2018).

A file is ``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...],
"y": [...]}}}``; a LEAF split is often several such files in one directory, which are merged.

JSON has no references, so what a file holds in memory is a small multiple of its size; the
counts in ``num_samples`` are only compared with the data, never used to allocate. Nesting
deeper than Python's JSON parser reads (its recursion limit, about a thousand levels; LEAF data
nests a few levels) and integers of more than 4,300 digits are refused as invalid JSON.
"""

from __future__ import annotations

import json
import os
import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from privfl.data.errors import DataFormatError

__all__ = ["LeafData", "read_leaf_json"]

PathLike = str | os.PathLike

#: A value shown in an error message: at most a few elements or characters of it.
_brief = reprlib.repr


@dataclass
class LeafData:
    """The content of one LEAF split: per-user lists of inputs and targets.

    Attributes
    ----------
    users
        User (writer, account, speaker) ids in file order.
    x, y
        ``x[user]`` and ``y[user]``: lists of that user's inputs and targets, as stored (numbers
        for FEMNIST, strings and nested lists for the text datasets).
    hierarchies
        The optional ``hierarchies`` entry of the files (empty when absent).
    """

    users: list[str]
    x: dict[str, list]
    y: dict[str, list]
    hierarchies: list = field(default_factory=list)

    @property
    def num_samples(self) -> np.ndarray:
        """Number of examples of each user, in the order of :attr:`users`."""
        return np.array([len(self.y[u]) for u in self.users], dtype=np.int64)

    def arrays(self, user: str, *, x_dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of one user as numpy arrays (numeric LEAF datasets such as FEMNIST)."""
        if user not in self.x:
            raise ValueError(f"user = {_brief(user)} is not allowed: not a user of this LEAF split")
        try:
            x = np.asarray(self.x[user], dtype=x_dtype)
            y = np.asarray(self.y[user], dtype=np.int64)
        except (TypeError, ValueError) as error:
            raise DataFormatError(
                f"user {_brief(user)}: LEAF data is not numeric ({error}); convert it first"
            ) from error
        return x, y


def _leaf_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
        if not files:
            raise FileNotFoundError(f"{path}: directory holds no LEAF .json files")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file or directory")
    return [path]


def _check_leaf(path: Path, content: object) -> tuple[list, list, dict, list]:
    if not isinstance(content, dict):
        raise DataFormatError(f"{path}: LEAF JSON must be an object, got {type(content).__name__}")
    missing = [k for k in ("users", "num_samples", "user_data") if k not in content]
    if missing:
        raise DataFormatError(f"{path}: LEAF JSON lacks the keys {missing}")
    users, counts, user_data = content["users"], content["num_samples"], content["user_data"]
    if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
        raise DataFormatError(f"{path}: 'users' must be a list of strings")
    if len(set(users)) != len(users):
        raise DataFormatError(f"{path}: 'users' has duplicate ids")
    if not isinstance(counts, list) or len(counts) != len(users):
        raise DataFormatError(
            f"{path}: 'num_samples' must be a list with one count per user "
            f"({len(users)} users)"
        )
    if not isinstance(user_data, dict):
        raise DataFormatError(f"{path}: 'user_data' must be an object keyed by user id")
    for user, count in zip(users, counts, strict=True):
        record = user_data.get(user)
        if not isinstance(record, dict) or "x" not in record or "y" not in record:
            raise DataFormatError(
                f"{path}: user_data[{_brief(user)}] must be an object with x and y"
            )
        if not isinstance(record["x"], list | np.ndarray) or not isinstance(record["y"], list):
            raise DataFormatError(f"{path}: user_data[{_brief(user)}] x and y must be lists")
        if isinstance(count, bool) or not isinstance(count, int):
            raise DataFormatError(
                f"{path}: num_samples of {_brief(user)} is not an integer: {_brief(count)}"
            )
        if len(record["x"]) != count or len(record["y"]) != count:
            raise DataFormatError(
                f"{path}: user {_brief(user)} has num_samples {_brief(count)} but "
                f"{len(record['x'])} x and {len(record['y'])} y entries"
            )
    extra = set(user_data) - set(users)
    if extra:
        raise DataFormatError(
            f"{path}: user_data has users not in 'users': {_brief(sorted(extra))}"
        )
    hierarchies = content.get("hierarchies", [])
    return users, counts, user_data, hierarchies if isinstance(hierarchies, list) else []


def _records_hook(convert: Callable[[list], object]) -> Callable[[dict], object]:
    """A ``json.load`` object hook that passes each user record's ``x`` list (an object of
    exactly the keys x and y, both lists) through ``convert`` as soon as it is parsed."""
    def hook(obj: dict) -> object:
        if obj.keys() == {"x", "y"} and isinstance(obj["x"], list) and isinstance(
                obj["y"], list):
            return {"x": convert(obj["x"]), "y": obj["y"]}
        return obj
    return hook


def read_leaf_json(path: PathLike | Iterable[PathLike], *,
                   convert_x: Callable[[list], object] | None = None) -> LeafData:
    """Read a LEAF split: one JSON file, a directory of them, or a list of files (merged).

    ``convert_x``: applied to each user's ``x`` list while the file is parsed (e.g. to a numpy
    array: the parsed lists of one user are then alive at a time, not a whole file's); it
    returns a numpy array, or the list unchanged to leave it to the caller.

    Raises :class:`DataFormatError` for invalid JSON, missing keys, counts that do not match
    the data, or a user that appears in two files.
    """
    hook = None if convert_x is None else _records_hook(convert_x)
    if isinstance(path, str | os.PathLike):
        files = _leaf_files(Path(path))
    else:
        files = [Path(p) for p in path]
        if not files:
            raise ValueError("path = [] is not allowed: must name at least one LEAF file")
    result = LeafData(users=[], x={}, y={})
    for file in files:
        try:
            with file.open("r", encoding="utf-8") as stream:
                content = json.load(stream, object_hook=hook)
        except RecursionError:
            raise DataFormatError(
                f"{file}: not valid LEAF JSON: nested deeper than Python's JSON parser reads "
                "(LEAF data nests a few levels)"
            ) from None
        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, int digit limit
            raise DataFormatError(f"{file}: not valid LEAF JSON ({error})") from error
        users, _, user_data, hierarchies = _check_leaf(file, content)
        for user in users:
            if user in result.x:
                raise DataFormatError(
                    f"{file}: user {_brief(user)} also appears in an earlier file"
                )
            result.users.append(user)
            result.x[user] = user_data[user]["x"]
            result.y[user] = user_data[user]["y"]
        result.hierarchies.extend(hierarchies)
    return result

