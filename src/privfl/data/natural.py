"""Natural-user federations from LEAF splits: FEMNIST, Shakespeare, Sent140 (Caldas et al. 2018).

One LEAF user (a FEMNIST writer, a Shakespeare speaking role, a Twitter account) is one client,
with the split's own train and test records of that user: LEAF's ``preprocess.sh ... -t sample``
splits each user's records, so a user appears in both ``train/`` and ``test/``. A user with test
records only is dropped (``info["test_only_groups"]``); a user with training records only gets
an empty test set.

The split is read file by file (:func:`privfl.data.leaf.read_leaf_json` checks each file) and
each user's records are converted to numpy before the next file is parsed, so the parsed JSON of
one file is alive at a time; a client is then an index array into the pooled records, as in
``leaf-synthetic`` (:mod:`privfl.data.population`): memory grows with the records, not with the
number of users (``benchmarks/leaf_memory.py`` measures it).

Formats, as LEAF writes them:

* ``femnist``: ``x`` 784 floats per record (a 28 x 28 image, kept as stored), ``y`` a class in
  ``[0, 62)`` (digits, upper case, lower case);
* ``shakespeare``: ``x`` a string of 80 characters, ``y`` the next character; inputs and target
  are ids of LEAF's alphabet (:func:`privfl.data.text.character_vocabulary`);
* ``sent140``: ``x`` the raw tweet record ``[id, date, query, user, text]`` (or the text alone),
  ``y`` the sentiment, 0 (negative) or 1 (positive); words are ids of a vocabulary the user
  gives (:mod:`privfl.data.text`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from privfl._validation import check_choice, check_int
from privfl.data.datasets import Dataset, FederatedDataset
from privfl.data.errors import DataFormatError, DatasetNotFoundError
from privfl.data.leaf import _brief, _leaf_files, read_leaf_json
from privfl.data.text import (
    SPLIT_VOCABULARY,
    VOCABULARY_INFO,
    Vocabulary,
    character_vocabulary,
    characters,
    encode,
    read_vocabulary,
    split_vocabulary,
    words,
)

__all__ = ["LEAF_NATURAL", "LEAF_SOURCE", "leaf_split_folders", "load_leaf_natural"]

PathLike = str | os.PathLike

#: where the splits come from (one line for ``privfl list datasets`` and error messages)
LEAF_SOURCE = ("LEAF JSON in data.root/<name>/data/{train,test} (github.com/TalwalkarLab/leaf: "
               "./preprocess.sh -s niid --sf 1.0 -k 0 -t sample)")
#: FEMNIST: 62 classes of 28 x 28 images
FEMNIST_CLASSES, FEMNIST_SHAPE = 62, (1, 28, 28)
#: LEAF's sequence lengths: Sent140 words (Li et al. 2018's 25), Shakespeare characters (80)
SENT140_SEQ_LEN, SHAKESPEARE_SEQ_LEN = 25, 80


@dataclass(frozen=True)
class _Format:
    """How one LEAF dataset's records become arrays."""

    name: str
    text: str  #: "" (numeric), "words" or "characters"
    default_seq_len: int = 0


LEAF_NATURAL = {
    "femnist": _Format("femnist", ""),
    "shakespeare": _Format("shakespeare", "characters", SHAKESPEARE_SEQ_LEN),
    "sent140": _Format("sent140", "words", SENT140_SEQ_LEN),
}


def leaf_split_folders(root: PathLike, name: str) -> tuple[list[Path], list[Path]]:
    """The ``.json`` files of ``root/<name>/data/train`` and ``.../test`` (or of
    ``root/<name>/train`` and ``.../test``); a one-line :class:`DatasetNotFoundError` when
    absent."""
    name = check_choice("name", name, LEAF_NATURAL)
    base = Path(root).expanduser() / name
    for folder in (base / "data", base):
        if (folder / "train").is_dir() and (folder / "test").is_dir():
            try:
                return _leaf_files(folder / "train"), _leaf_files(folder / "test")
            except FileNotFoundError as error:
                raise DatasetNotFoundError(f"{name}: {error}; {LEAF_SOURCE}") from None
    message = (f"{name} is not in {base}/data/{{train,test}} (nor {base}/{{train,test}}): "
               f"put the {LEAF_SOURCE.replace('data.root', str(Path(root)))} there")
    raise DatasetNotFoundError(message, settings=message)


def _numbers(x: list) -> object:
    """A user's numeric ``x`` as float32, converted while its file is parsed (about 38 bytes a
    number as Python lists, 4 as float32); left as a list when it is not numbers of one shape,
    for :func:`_femnist` to refuse."""
    try:
        return np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError):
        return x


def _user_records(files: list[Path], numeric: bool = False
                  ) -> Iterator[tuple[Path, str, list, list]]:
    """``(file, user, x, y)`` of each user, one file parsed at a time (``numeric``: each user's
    ``x`` made float32 as it is parsed); a user in two files is refused."""
    seen: set[str] = set()
    for file in files:
        leaf = read_leaf_json(file, convert_x=_numbers if numeric else None)
        for user in leaf.users:
            if user in seen:
                raise DataFormatError(f"{file}: user {_brief(user)} also appears in an earlier "
                                      "file of the split")
            seen.add(user)
            yield file, user, leaf.x.pop(user), leaf.y.pop(user)
        del leaf


def _femnist(file: Path, user: str, x: list, y: list) -> tuple[np.ndarray, np.ndarray]:
    try:
        xs = np.asarray(x, dtype=np.float32)
        ys = np.asarray(y)
    except (TypeError, ValueError) as error:
        raise DataFormatError(f"{file}: user {_brief(user)}: FEMNIST x must be lists of 784 "
                              f"numbers ({error})") from None
    if xs.ndim != 2 or xs.shape[1] != 784:
        raise DataFormatError(f"{file}: user {_brief(user)}: FEMNIST x has shape {xs.shape}: "
                              "must be one list of 784 pixel values per record")
    if not np.isfinite(xs).all():
        raise DataFormatError(f"{file}: user {_brief(user)}: FEMNIST x holds NaN or infinite "
                              "pixel values")
    return xs.reshape(-1, *FEMNIST_SHAPE), _classes(file, user, ys, FEMNIST_CLASSES)


def _classes(file: Path, user: str, y: np.ndarray, count: int) -> np.ndarray:
    if y.size and (not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= count):
        raise DataFormatError(f"{file}: user {_brief(user)}: y = {_brief(y.tolist())} is out of "
                              f"range: must be integer classes in [0, {count - 1}]")
    return y.astype(np.int64)


def _tweet(file: Path, user: str, record: object) -> str:
    text = record[4] if isinstance(record, list) and len(record) == 5 else record
    if not isinstance(text, str):
        raise DataFormatError(f"{file}: user {_brief(user)}: Sent140 x entries must be "
                              "[id, date, query, user, text] records or text: got "
                              f"{_brief(record)}")
    return text


def _texts(fmt: _Format, file: Path, user: str, x: list, y: list) -> list[list[str]]:
    """The token lists of a user's inputs (Shakespeare: also checks the targets)."""
    if fmt.text == "words":
        return [words(_tweet(file, user, record)) for record in x]
    if not all(isinstance(s, str) for s in x) or not all(
            isinstance(c, str) and len(c) == 1 for c in y):
        raise DataFormatError(f"{file}: user {_brief(user)}: Shakespeare x must be strings and "
                              "y single characters")
    return [characters(s) for s in x]


def _text_arrays(fmt: _Format, vocabulary: Vocabulary, seq_len: int, file: Path, user: str,
                 x: list, y: list) -> tuple[np.ndarray, np.ndarray]:
    tokens = _texts(fmt, file, user, x, y)
    if fmt.text == "words":
        labels = np.asarray(y)
        if labels.size and labels.dtype == np.bool_:
            labels = labels.astype(object)  # refused below
        return encode(tokens, vocabulary, seq_len), _classes(file, user, labels, 2)
    return (encode(tokens, vocabulary, seq_len, keep="last"),
            np.array([vocabulary.id(c) for c in y], dtype=np.int64))


def _pool(files: list[Path], convert: Callable, users: int | None, split: str, name: str,
          numeric: bool) -> tuple[list[np.ndarray], list[np.ndarray], list[str], list[int]]:
    """The split's records as one block per file (a user's records are consecutive), user
    ids and sizes, in file order."""
    xs, ys, ids, sizes = [], [], [], []
    file_x: list[np.ndarray] = []
    file_y: list[np.ndarray] = []
    current = None

    def close_file() -> None:
        if file_x:
            xs.append(np.concatenate(file_x))
            ys.append(np.concatenate(file_y))
            file_x.clear()
            file_y.clear()

    for file, user, x, y in _user_records(files, numeric):
        if users is not None and len(ids) >= users:
            break
        if file != current:
            close_file()
            current = file
        if not len(y):
            continue
        x_arr, y_arr = convert(file, user, x, y)
        file_x.append(x_arr)
        file_y.append(y_arr)
        ids.append(user)
        sizes.append(len(y_arr))
    close_file()
    if not ids:
        raise DataFormatError(f"{name}: the LEAF {split} split holds no records")
    return xs, ys, ids, sizes


def _vocabulary(fmt: _Format, vocabulary: str | None, limit: int | None,
                train_files: list[Path]) -> Vocabulary:
    if vocabulary == SPLIT_VOCABULARY:
        return split_vocabulary(
            (t for f, u, x, y in _user_records(train_files) for t in _texts(fmt, f, u, x, y)),
            limit=limit)
    if vocabulary is not None:
        return read_vocabulary(vocabulary, limit=limit)
    if fmt.text == "characters":
        return character_vocabulary()
    raise DatasetNotFoundError(
        "sent140 needs a vocabulary: set data.vocabulary to a public word list or GloVe text "
        "file (e.g. glove.6B.300d.txt, https://nlp.stanford.edu/projects/glove/), or to "
        f"{SPLIT_VOCABULARY!r} to build it from the private training split (the privacy card "
        "then says the guarantee does not cover it)")


def load_leaf_natural(name: str, root: PathLike, *, users: int | None = None,
                      vocabulary: str | None = None, vocabulary_size: int | None = None,
                      seq_len: int | None = None) -> FederatedDataset:
    """The natural federation of LEAF dataset ``name`` (``femnist``, ``shakespeare``,
    ``sent140``) under ``root`` (:func:`leaf_split_folders`).

    ``users``: keep the first ``users`` users with training records, in file order (all by
    default). Text datasets: ``vocabulary`` is a file (:func:`privfl.data.text.read_vocabulary`)
    or ``"training-split"`` (not public); the default is LEAF's alphabet for Shakespeare, and
    Sent140 requires one. ``vocabulary_size`` keeps that many words; ``seq_len`` tokens per
    input (LEAF: 25 words, 80 characters).
    """
    fmt = LEAF_NATURAL[check_choice("name", name, LEAF_NATURAL)]
    if users is not None:
        users = check_int("users", users, 1)
    train_files, test_files = leaf_split_folders(root, name)
    info: dict = {}
    extra: dict = {}
    if fmt.text:
        seq_len = fmt.default_seq_len if seq_len is None else check_int("seq_len", seq_len, 1)
        vocab = _vocabulary(fmt, vocabulary, vocabulary_size, train_files)
        info[VOCABULARY_INFO] = vocab.describe()
        info["vocabulary_public"] = vocab.public
        extra["vocabulary"] = vocab.tokens

        def convert(file: Path, user: str, x: list, y: list) -> tuple[np.ndarray, np.ndarray]:
            return _text_arrays(fmt, vocab, seq_len, file, user, x, y)
        num_classes = 2 if fmt.text == "words" else len(vocab)
    else:
        if vocabulary is not None or seq_len is not None:
            raise ValueError("vocabulary and seq_len are not allowed for femnist: they apply to "
                             "the text datasets sent140 and shakespeare")
        convert, num_classes = _femnist, FEMNIST_CLASSES
    pools = {}
    for split, files in (("train", train_files), ("test", test_files)):
        xs, ys, ids, sizes = _pool(files, convert, users if split == "train" else None, split,
                                   name, numeric=not fmt.text)
        x = np.concatenate(xs)
        del xs
        ranges = np.split(np.arange(len(x), dtype=np.int64), np.cumsum(sizes)[:-1])
        pools[split] = (Dataset(x, np.concatenate(ys), f"{name}/{split}", num_classes, **extra),
                        dict(zip(ids, ranges, strict=True)))
    (train, train_of), (test, test_of) = pools["train"], pools["test"]
    empty = np.zeros(0, dtype=np.int64)
    dropped = [user for user in test_of if user not in train_of]
    data = FederatedDataset(
        train, test, list(train_of.values()), [test_of.get(u, empty) for u in train_of],
        client_ids=list(train_of), name=f"{name}/natural({len(train_of)} users)",
        info={"partition": "natural", "source": "LEAF", "test_only_groups": dropped, **info})
    return data


# ------------------------------------------------------------------ registered loaders
def _from_config(name: str, c: object) -> FederatedDataset:
    from privfl.data.download import data_home

    return load_leaf_natural(name, data_home(c.root), users=c.users,  # type: ignore[attr-defined]
                             vocabulary=c.vocabulary,  # type: ignore[attr-defined]
                             vocabulary_size=c.vocabulary_size,  # type: ignore[attr-defined]
                             seq_len=c.seq_len)  # type: ignore[attr-defined]


def femnist(c: object, seed: int) -> FederatedDataset:
    """``data.dataset: femnist`` (registered in :mod:`privfl.config.datasets`)."""
    return _from_config("femnist", c)


def shakespeare(c: object, seed: int) -> FederatedDataset:
    """``data.dataset: shakespeare``."""
    return _from_config("shakespeare", c)


def sent140(c: object, seed: int) -> FederatedDataset:
    """``data.dataset: sent140``."""
    return _from_config("sent140", c)
