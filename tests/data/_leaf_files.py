"""Small LEAF splits in LEAF's own JSON layout (``<root>/<name>/data/{train,test}/*.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from privfl.data.text import SHAKESPEARE_CHARACTERS

#: the words generated tweets are made of; "good" tweets are positive (label 1)
POSITIVE, NEGATIVE, FILLER = ["good", "great", "love"], ["bad", "awful", "hate"], ["the", "day"]


def leaf_file(users: dict[str, tuple[list, list]]) -> dict:
    """One LEAF JSON object from ``{user: (x, y)}``."""
    return {"users": list(users), "num_samples": [len(y) for _, y in users.values()],
            "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()}}


def write_split(root: Path, name: str, train: list[dict], test: list[dict]) -> Path:
    """Write LEAF objects as ``root/name/data/{train,test}/part_<k>.json``; returns ``root``."""
    for split, parts in (("train", train), ("test", test)):
        folder = root / name / "data" / split
        folder.mkdir(parents=True, exist_ok=True)
        for k, content in enumerate(parts):
            (folder / f"part_{k}.json").write_text(json.dumps(content))
    return root


def femnist_users(users: list[str], sizes: list[int], seed: int = 0) -> dict:
    """Learnable FEMNIST-shaped records: class c lights up row c % 28 of the image."""
    rng = np.random.default_rng(seed)
    out = {}
    for user, size in zip(users, sizes, strict=True):
        y = rng.integers(0, 62, size=size)
        x = rng.random((size, 28, 28)) * 0.2
        x[np.arange(size), y % 28, :] += 0.8
        out[user] = (x.reshape(size, 784).round(3).tolist(), y.tolist())
    return out


def shakespeare_users(users: list[str], sizes: list[int], seed: int = 0,
                      length: int = 80) -> dict:
    """Lines of LEAF's alphabet; the target is the character after the line."""
    rng = np.random.default_rng(seed)
    alphabet = np.array(list(SHAKESPEARE_CHARACTERS))
    out = {}
    for user, size in zip(users, sizes, strict=True):
        text = "".join(rng.choice(alphabet, size=size + length))
        out[user] = ([text[i:i + length] for i in range(size)],
                     [text[i + length] for i in range(size)])
    return out


def sent140_users(users: list[str], sizes: list[int], seed: int = 0) -> dict:
    """Tweets as LEAF stores them, ``[id, date, query, user, text]``; label 1 when the tweet
    holds a positive word."""
    rng = np.random.default_rng(seed)
    out = {}
    for user, size in zip(users, sizes, strict=True):
        y = rng.integers(0, 2, size=size)
        x = []
        for i, label in enumerate(y):
            mood = POSITIVE if label else NEGATIVE
            text = " ".join([*rng.choice(FILLER, 3), str(rng.choice(mood)), "!"])
            x.append([str(1000 + i), "Mon Apr 06 22:19:45 PDT 2009", "NO_QUERY", user, text])
        out[user] = (x, y.tolist())
    return out


def write_words(path: Path, words: list[str], glove_dim: int = 0) -> Path:
    """A word list, or a GloVe text file (``word v1 ... v_dim``) when ``glove_dim`` > 0."""
    rng = np.random.default_rng(1)
    lines = [w + "".join(f" {v:.4f}" for v in rng.normal(size=glove_dim)) for w in words]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
