"""Word vectors from a GloVe text file, for the rows of a model's vocabulary.

Format (Pennington, Socher and Manning 2014, ``glove.6B.300d.txt`` as LEAF and Li et al. 2018
use it): one word per line, ``word v_1 ... v_D`` separated by single spaces, UTF-8. The file is
streamed line by line and only the vocabulary's rows are kept, so memory is ``V D`` whatever
the file's size. Refused with a :class:`~privfl.data.errors.DataFormatError` naming the file and
line: a row whose number of values differs from ``D`` (ragged rows; a word containing a space,
as in a few lines of ``glove.840B``, counts as one), a value that is not a finite number (NaN,
inf), a vocabulary word listed twice, a line longer than :data:`MAX_LINE_CHARS`, bytes that are
not UTF-8, a file with no vocabulary word at all.

Rows of the returned matrix (index = token id of the vocabulary, ``0 = "<pad>"``,
``1 = "<unk>"``): the pad row is zero; a word found in the file gets its vector; ``<unk>`` and
every word missing from the file get ``N(0, s^2)`` entries with ``s`` the standard deviation of
the vectors found (drawn from torch's global generator, which the model builder seeds), and are
counted in :attr:`GloveVectors.missing`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from privfl._validation import check_int
from privfl.data.errors import DataFormatError

__all__ = ["MAX_LINE_CHARS", "PAD", "UNK", "GloveVectors", "check_vocabulary", "read_glove"]

#: reserved tokens of every text vocabulary (the data side's contract): id 0 and id 1
PAD, UNK = "<pad>", "<unk>"
#: longest line read (a 300-d GloVe line has ~3,000 characters)
MAX_LINE_CHARS = 1 << 20  # bytes


def check_vocabulary(vocabulary: object) -> tuple[str, ...]:
    """``vocabulary`` as a tuple of distinct words with ``<pad>`` at 0 and ``<unk>`` at 1."""
    if isinstance(vocabulary, str) or not isinstance(vocabulary, Sequence):
        raise ValueError(f"vocabulary = {type(vocabulary).__name__} is not allowed: must be a "
                         "sequence of words (index = token id)")
    words = tuple(vocabulary)
    if len(words) < 3 or words[0] != PAD or words[1] != UNK:
        raise ValueError(f"vocabulary = {words[:3]!r}... is not allowed: must start with "
                         f"{PAD!r} (id 0) and {UNK!r} (id 1) and hold at least one word")
    if not all(isinstance(w, str) for w in words):
        raise ValueError("vocabulary is not allowed: every entry must be a str")
    if len(set(words)) != len(words):
        seen: set[str] = set()
        dup = next(w for w in words if w in seen or seen.add(w))
        raise ValueError(f"vocabulary is not allowed: {dup!r} appears twice")
    return words


@dataclass(frozen=True)
class GloveVectors:
    """A vocabulary's embedding matrix from a GloVe file (see the module docstring)."""

    matrix: torch.Tensor  #: [V, D] float32
    path: str
    sha256: str  #: of the whole file
    found: int  #: vocabulary words (not counting <pad>, <unk>) found in the file
    missing: int  #: vocabulary words not in the file (random rows)
    missing_examples: tuple[str, ...]  #: up to 10 of them, in vocabulary order

    def summary(self) -> str:
        """One line: how much of the vocabulary the file covered."""
        words = self.found + self.missing
        shown = ", ".join(repr(w) for w in self.missing_examples[:5])
        return (f"{self.path}: {self.found} of {words} vocabulary words found, {self.missing} "
                f"missing (random rows){': ' + shown if shown else ''}")


def _fail(path, line: int, what: str) -> DataFormatError:
    return DataFormatError(f"{path}: line {line}: {what}")


def _lines(path: Path, digest):
    """``(line number, text)``, decoded line by line (so an error names its line); every byte
    read goes into ``digest``."""
    with path.open("rb") as stream:
        number = 0
        while True:
            number += 1
            raw = stream.readline(MAX_LINE_CHARS + 1)
            if not raw:
                return
            digest.update(raw)
            if len(raw) > MAX_LINE_CHARS:
                raise _fail(path, number, f"longer than {MAX_LINE_CHARS} bytes: not a GloVe row")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise _fail(path, number, f"not UTF-8 ({error.reason})") from None
            yield number, line.rstrip("\n").rstrip("\r")


def read_glove(path: str | os.PathLike, vocabulary: Sequence[str], dim: int) -> GloveVectors:
    """The ``[V, dim]`` embedding matrix of ``vocabulary`` from the GloVe file at ``path``."""
    words = check_vocabulary(vocabulary)
    dim = check_int("dim", dim, 1)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model.embeddings = {str(path)!r}: no such GloVe file")
    index = {w: i for i, w in enumerate(words) if i > 1}
    matrix = np.zeros((len(words), dim), dtype=np.float32)
    where: dict[int, int] = {}  # token id -> line
    digest = hashlib.sha256()
    for number, line in _lines(path, digest):
        if not line.strip():
            continue
        fields = line.split(" ")
        if len(fields) != dim + 1:
            raise _fail(path, number, f"{len(fields) - 1} values after the word: the model's "
                        f"embedding_dim is {dim} (a ragged row, a file of another dimension, or "
                        "a word containing a space)")
        token = index.get(fields[0])
        if token is None:
            continue
        if token in where:
            raise _fail(path, number, f"word {fields[0]!r} appears again (first at line "
                        f"{where[token]})")
        try:
            row = np.array(fields[1:], dtype=np.float64)
        except ValueError:
            raise _fail(path, number, f"a value of {fields[0]!r} is not a number") from None
        if not np.isfinite(row).all() or np.abs(row).max() > np.finfo(np.float32).max:
            raise _fail(path, number, f"word {fields[0]!r} has a value that is not a finite "
                        "float32 (NaN, inf or overflow)")
        matrix[token] = row
        where[token] = number
    if not where:
        raise DataFormatError(f"{path}: none of the vocabulary's {len(index)} words is in the "
                              "file: a different language or tokenisation, or not a GloVe file")
    found = np.array(sorted(where))
    scale = float(matrix[found].std()) or 1.0
    absent = [i for i in range(1, len(words)) if i not in where]
    out = torch.from_numpy(matrix)
    if absent:
        rows = torch.tensor(absent)
        out[rows] = torch.randn(len(absent), dim) * scale
    missing = [words[i] for i in absent if i > 1]
    return GloveVectors(out, str(path), digest.hexdigest(), len(where), len(missing),
                        tuple(missing[:10]))
