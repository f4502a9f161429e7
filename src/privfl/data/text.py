"""Tokenisation of LEAF's text datasets: words (Sent140) and characters (Shakespeare).

A :class:`Vocabulary` maps tokens to int64 ids with two reserved ids, ``0 = "<pad>"`` and
``1 = "<unk>"``; a text becomes a row of ``seq_len`` ids, padded with 0 on the right, tokens
not in the vocabulary read as 1. The models read ``Dataset.vocabulary`` (its size, and the
GloVe rows of its words).

Where the vocabulary comes from decides what a released model tells about the training data:
an embedding row exists for each word of the vocabulary, so a vocabulary built from the private
training split publishes which words its users wrote. privfl's defaults are public:

* Shakespeare: LEAF's fixed alphabet of 80 characters (``ALL_LETTERS`` in LEAF's
  ``models/utils/language_utils.py``; Caldas et al. 2018), :func:`character_vocabulary`;
* Sent140: a word list the user gives (one token per line, or a GloVe text file whose first
  field on each line is the word; Pennington et al. 2014), :func:`read_vocabulary`.

:func:`split_vocabulary` builds one from the training split on request; its
:attr:`Vocabulary.public` is False and the run's privacy card says the guarantee does not cover
it (:func:`vocabulary_card_rows`).

Words are LEAF's ``split_line`` tokens (``[\\w']+`` runs and ``.,!?;``), lower-cased to match
GloVe's lower-case vocabulary; Sent140 keeps a tweet's first ``seq_len`` words (LEAF: 25).
Characters are kept as written; Shakespeare keeps a line's last ``seq_len`` characters (LEAF: 80)
and predicts the next one.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from privfl._validation import check_choice, check_int
from privfl.data.errors import DataFormatError, DatasetNotFoundError

__all__ = [
    "PAD",
    "SHAKESPEARE_CHARACTERS",
    "SPLIT_VOCABULARY",
    "UNK",
    "VOCABULARY_INFO",
    "Vocabulary",
    "character_vocabulary",
    "characters",
    "encode",
    "read_vocabulary",
    "split_vocabulary",
    "vocabulary_card_rows",
    "words",
]

PAD, UNK = "<pad>", "<unk>"
#: LEAF's Shakespeare alphabet (``ALL_LETTERS``, 80 characters): public, fixed by LEAF's code
SHAKESPEARE_CHARACTERS = ("\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmno"
                          "pqrstuvwxyz}")
#: ``data.vocabulary`` value that builds the vocabulary from the training split (leaks)
SPLIT_VOCABULARY = "training-split"
#: key of ``FederatedDataset.info`` that describes the vocabulary (for the privacy card)
VOCABULARY_INFO = "vocabulary"
#: LEAF's word pattern (``split_line`` in ``models/utils/language_utils.py``)
_WORD = re.compile(r"[\w']+|[.,!?;]")
#: longest vocabulary line read (a GloVe 300-d line is about 3,000 characters)
_MAX_LINE = 1 << 16


def words(text: str) -> list[str]:
    """LEAF's word tokens of ``text``, lower-cased."""
    return _WORD.findall(text.lower())


def characters(text: str) -> list[str]:
    """The characters of ``text``, as written."""
    return list(text)


@dataclass(frozen=True)
class Vocabulary:
    """Tokens by id: ``tokens[0] == "<pad>"``, ``tokens[1] == "<unk>"``, then distinct tokens.

    ``source`` says where it comes from (a file, LEAF's alphabet, the training split);
    ``public`` whether that is public information (False: built from private data).
    """

    tokens: tuple[str, ...]
    source: str
    public: bool
    _ids: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tokens = tuple(self.tokens)
        if len(tokens) < 3 or tokens[:2] != (PAD, UNK):
            raise ValueError(f"tokens = {tokens[:3]!r}... is not allowed: must start with "
                             f"{PAD!r}, {UNK!r} and hold at least one more token")
        if len(set(tokens)) != len(tokens):
            raise ValueError("tokens is not allowed: has duplicate tokens")
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "_ids", {t: i for i, t in enumerate(tokens)})

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, token: str) -> int:
        """The id of ``token`` (1, ``<unk>``, when absent)."""
        return self._ids.get(token, 1)

    def describe(self) -> str:
        """One line for the privacy card."""
        covered = ("public: the guarantee covers models built on it" if self.public else
                   "built from the private training split: the guarantee does NOT cover it, and "
                   "every released model (its embedding rows, its output classes) reveals which "
                   "tokens the users wrote")
        return f"{len(self)} tokens from {self.source} ({covered})"


def encode(token_lists: Iterable[Sequence[str]], vocabulary: Vocabulary, seq_len: int, *,
           keep: str = "first") -> np.ndarray:
    """``n x seq_len`` int64 ids: each list's first (``keep="first"``) or last (``"last"``)
    ``seq_len`` tokens, right-padded with 0; unknown tokens are 1."""
    seq_len = check_int("seq_len", seq_len, 1)
    keep = check_choice("keep", keep, ("first", "last"))
    rows = []
    for tokens in token_lists:
        kept = tokens[:seq_len] if keep == "first" else tokens[-seq_len:]
        row = np.zeros(seq_len, dtype=np.int64)
        row[:len(kept)] = [vocabulary.id(t) for t in kept]
        rows.append(row)
    return np.stack(rows) if rows else np.zeros((0, seq_len), dtype=np.int64)


def character_vocabulary() -> Vocabulary:
    """LEAF's 80 Shakespeare characters after ``<pad>`` and ``<unk>`` (82 ids; public)."""
    return Vocabulary((PAD, UNK, *SHAKESPEARE_CHARACTERS),
                      "LEAF's Shakespeare alphabet (Caldas et al. 2018)", public=True)


def read_vocabulary(path: str | os.PathLike, *, limit: int | None = None) -> Vocabulary:
    """A public vocabulary from a file: the first whitespace-separated field of each line (a
    word list, or a GloVe text file ``word v1 v2 ...``), in file order, repeats and ``<pad>``/
    ``<unk>`` skipped; ``limit`` keeps the first ``limit`` words (GloVe lists by frequency)."""
    path = Path(path)
    if limit is not None:
        limit = check_int("limit", limit, 1)
    if not path.is_file():
        raise DatasetNotFoundError(
            f"data.vocabulary = {str(path)!r}: no such file (give a word list, one word per "
            "line, or a GloVe text file such as glove.6B.300d.txt from "
            "https://nlp.stanford.edu/projects/glove/)")
    seen = {PAD, UNK}
    tokens = [PAD, UNK]
    try:
        with path.open("r", encoding="utf-8") as stream:
            for number, line in enumerate(iter(lambda: stream.readline(_MAX_LINE + 1), ""), 1):
                if len(line) > _MAX_LINE:
                    raise DataFormatError(f"{path}: line {number} is longer than {_MAX_LINE} "
                                          "characters: not a word list or GloVe text file")
                fields = line.split(maxsplit=1)
                if not fields or fields[0] in seen:
                    continue
                seen.add(fields[0])
                tokens.append(fields[0])
                if limit is not None and len(tokens) - 2 >= limit:
                    break
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{path}: not UTF-8 text ({error})") from None
    if len(tokens) == 2:
        raise DataFormatError(f"{path}: holds no words (one word per line, or GloVe text)")
    return Vocabulary(tuple(tokens), f"the file {path}", public=True)


def split_vocabulary(token_lists: Iterable[Sequence[str]], *,
                     limit: int | None = None) -> Vocabulary:
    """The tokens of the training split by decreasing count (ties by token), at most ``limit``
    of them: NOT public (the privacy card says so)."""
    if limit is not None:
        limit = check_int("limit", limit, 1)
    counts: Counter[str] = Counter()
    for tokens in token_lists:
        counts.update(tokens)
    for reserved in (PAD, UNK):
        counts.pop(reserved, None)
    if not counts:
        raise ValueError("the training split holds no tokens: cannot build a vocabulary")
    ordered = sorted(counts, key=lambda t: (-counts[t], t))[:limit]
    return Vocabulary((PAD, UNK, *ordered), "the training split", public=False)


def vocabulary_card_rows(info: dict) -> dict[str, str]:
    """The privacy card's row on a text dataset's vocabulary (``{}`` for other data)."""
    text = info.get(VOCABULARY_INFO)
    return {"vocabulary": text} if text else {}
