"""The predictions of M Monte Carlo replicas, in memory and in one file.

:class:`ReplicaResult` holds, for every evaluation set (``"test"``: the clean test split; any
extra set the caller passed, e.g. a backdoored test set), each replica's hard labels
(``predictions[name]``: ``[M, N]``, the argmax of the model's output) and softmax
probabilities (``probabilities[name]``: ``[M, N, C]`` float32), the true labels of the set, the
replica seeds, the privacy statement and the digests that identify what was trained.

:func:`save_replicas` writes them to ``DIR/replicas.npz`` (numpy's zip format, written to a
temporary file and renamed); :func:`load_replicas` reads them back, checks the SHA-256 of every
array and of the metadata (privacy statement, configuration, digests) against the digests
stored with them, and, when given the configuration (or the data), refuses a file trained for
another one. A certification can then be recomputed without retraining.

The digests carry no secret key: they detect accidents (a damaged or truncated copy, a file of
another run), not forgery; whoever can write the file can recompute them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from privfl.robustness.replica_privacy import ReplicaPrivacy
from privfl.runs.checkpoints import digest_json

__all__ = ["FILE_NAME", "FORMAT", "ReplicaResult", "check_set_name", "config_digest",
           "data_digest", "load_replicas", "save_replicas"]

FORMAT = "privfl-replicas/2"
#: Formats before metadata digests (refused with a note).
_OLD_FORMATS = ("privfl-replicas/1",)
FILE_NAME = "replicas.npz"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.]*")
_KINDS = ("labels", "predictions", "probabilities")


def check_set_name(name: object) -> str:
    """An evaluation set's name: letters, digits, ``_`` and ``.`` (it names arrays in the
    file)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"eval_sets name = {name!r} is not allowed: use letters, digits, '_' "
                         "and '.' (starting with a letter or digit)")
    return name


def config_digest(config: Any) -> str:
    """SHA-256 of everything in the configuration that can change a replica: every section
    except ``run`` (execution settings) and the free-text ``name`` / ``description``."""
    values = config.model_dump(mode="json")
    for key in ("run", "name", "description"):
        values.pop(key, None)
    return digest_json(values)


def data_digest(data: Any) -> str:
    """SHA-256 of a :class:`~privfl.data.FederatedDataset`: the partition (every client's
    train and test indices) and the records (train and test inputs and labels)."""
    from privfl.algorithms.algorithm_support import data_fingerprint

    digest = hashlib.sha256(data_fingerprint(data).encode())
    for split in (data.train, data.test):
        for array in (split.x, split.y):
            digest.update(np.ascontiguousarray(array).tobytes())
            digest.update(b"|")
    return digest.hexdigest()


@dataclass
class ReplicaResult:
    """What :func:`~privfl.robustness.montecarlo.train_replicas` produced (see the module
    docstring). ``seeds[r]``: replica ``r`` is the configuration run with that seed (on the
    partition and attack of the configuration's own seed). ``info``: algorithm, rounds, layout,
    timings, the configuration itself. ``weights``: the final flat models ``[M, d]`` when they
    were kept (never saved to the file)."""

    models: int
    seeds: np.ndarray
    labels: dict[str, np.ndarray]
    predictions: dict[str, np.ndarray]
    probabilities: dict[str, np.ndarray]
    privacy: ReplicaPrivacy
    config_digest: str
    data_digest: str
    seconds: float
    info: dict[str, Any] = field(default_factory=dict)
    weights: torch.Tensor | None = None
    path: Path | None = None

    def _set(self, name: str) -> str:
        if name not in self.predictions:
            raise ValueError(f"name = {name!r} is not an evaluation set of these replicas: "
                             f"one of {', '.join(sorted(self.predictions))}")
        return name

    def accuracy(self, name: str = "test") -> np.ndarray:
        """``[M]``: each replica's accuracy on the set (its labels; a backdoor set's labels are
        the target class, so this is the attack success there). Not private."""
        name = self._set(name)
        return (self.predictions[name] == self.labels[name][None, :]).mean(axis=1)

    def mean_probabilities(self, name: str = "test") -> np.ndarray:
        """``[N, C]``: the Monte Carlo estimate of ``F_c(x) = E[softmax_c(model(x))]`` (the mean
        over the M replicas, float64; Xie et al. 2023 Eq. 4)."""
        return self.probabilities[self._set(name)].astype(np.float64).mean(axis=0)

    def vote_fractions(self, name: str = "test") -> np.ndarray:
        """``[N, C]``: the fraction of replicas predicting each class (hard votes)."""
        name = self._set(name)
        classes = self.probabilities[name].shape[2]
        votes = np.zeros((self.predictions[name].shape[1], classes))
        for c in range(classes):
            votes[:, c] = (self.predictions[name] == c).mean(axis=0)
        return votes


def _stored(kind: str, array: np.ndarray, classes: int) -> np.ndarray:
    """The array as written: hard labels in the smallest unsigned type that holds the classes."""
    if kind in ("labels", "predictions"):
        return array.astype(np.uint8 if classes <= 256 else np.int64)
    return np.ascontiguousarray(array, dtype=np.float32)


def _sha(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _meta_digest(meta: dict[str, Any]) -> str:
    """SHA-256 of the metadata, its own digest left out (as JSON with sorted keys)."""
    return digest_json({k: v for k, v in meta.items() if k != "meta_sha256"})


#: Metadata entries every replica file holds, and their JSON types.
_META_TYPES = {"format": str, "models": int, "config_digest": str, "data_digest": str,
               "seconds": (int, float), "privacy": dict, "info": dict, "sets": list,
               "sha256": dict, "meta_sha256": str}


def _check_meta(meta: Any, path: Path) -> dict[str, Any]:
    """The metadata of a replica file, or a one-line ValueError saying what is damaged."""
    where = f"path = {str(path)!r}"
    if not isinstance(meta, dict):
        raise ValueError(f"{where} is damaged: its metadata is a JSON {type(meta).__name__}, "
                         "not an object")
    if meta.get("format") in _OLD_FORMATS:
        raise ValueError(f"{where} has format {meta['format']!r}, written before the metadata "
                         f"carried a digest: certify again to write {FORMAT!r}")
    if meta.get("format") != FORMAT:
        raise ValueError(f"{where} has format {meta.get('format')!r}: expected {FORMAT!r}")
    for key, kind in _META_TYPES.items():
        if key not in meta:
            raise ValueError(f"{where} is damaged: its metadata has no {key!r}")
        if not isinstance(meta[key], kind) or isinstance(meta[key], bool):
            raise ValueError(f"{where} is damaged: its metadata's {key!r} is a "
                             f"{type(meta[key]).__name__}")
    if _meta_digest(meta) != meta["meta_sha256"]:
        raise ValueError(f"{where} is damaged: the SHA-256 of its metadata differs from the "
                         "digest written with it")
    if not all(isinstance(name, str) for name in meta["sets"]):
        raise ValueError(f"{where} is damaged: its metadata's 'sets' are not names")
    return meta


def save_replicas(result: ReplicaResult, directory: str | Path) -> Path:
    """Write ``result`` to ``directory/replicas.npz`` (the directory is created; an existing
    file is refused). Returns the file's path and sets ``result.path``."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"out = {str(directory)!r} is not a directory")
    path = directory / FILE_NAME
    if path.exists():
        raise ValueError(f"out = {str(directory)!r} already holds {FILE_NAME}: choose another "
                         "directory or remove the file")
    directory.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {"seeds": np.asarray(result.seeds, dtype=np.uint64)}
    for name in result.predictions:
        classes = result.probabilities[name].shape[2]
        for kind in _KINDS:
            arrays[f"{kind}-{name}"] = _stored(kind, getattr(result, kind)[name], classes)
    meta = {
        "format": FORMAT, "models": result.models, "config_digest": result.config_digest,
        "data_digest": result.data_digest, "seconds": result.seconds,
        "privacy": result.privacy.to_dict(), "info": result.info,
        "sets": sorted(result.predictions), "sha256": {k: _sha(v) for k, v in arrays.items()},
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    meta = json.loads(json.dumps(meta, sort_keys=True, default=str))  # as it will be read
    meta["meta_sha256"] = _meta_digest(meta)
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    tmp = directory / f".{FILE_NAME}.tmp"
    with open(tmp, "wb") as stream:
        np.savez_compressed(stream, **arrays)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(tmp, path)
    result.path = path
    return path


def load_replicas(path: str | Path, *, config: Any = None, data: Any = None) -> ReplicaResult:
    """Read ``replicas.npz`` (``path``: the file or its directory). Every array's SHA-256 is
    checked against the digests stored with it; with ``config`` (an
    :class:`~privfl.config.ExperimentConfig`) or ``data`` (a
    :class:`~privfl.data.FederatedDataset`), a file trained for another configuration or other
    data is refused."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE_NAME
    if not path.is_file():
        raise ValueError(f"path = {str(path)!r} does not exist: give a directory written by "
                         f"train_replicas (out=...) or its {FILE_NAME}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
        meta = json.loads(str(arrays.pop("meta")))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"path = {str(path)!r} is not a readable replica file: {error}") from None
    meta = _check_meta(meta, path)
    expected = meta["sha256"]
    if set(expected) != set(arrays):
        raise ValueError(f"path = {str(path)!r} is damaged: it holds arrays "
                         f"{sorted(arrays)}, its digests name {sorted(expected)}")
    for key, array in arrays.items():
        if _sha(array) != expected[key]:
            raise ValueError(f"path = {str(path)!r} is damaged: the SHA-256 of {key} differs "
                             "from the digest written with it")
    if config is not None and config_digest(config) != meta["config_digest"]:
        raise ValueError(f"config does not match {str(path)!r}: its replicas were trained for "
                         f"configuration digest {meta['config_digest'][:12]}..., this one is "
                         f"{config_digest(config)[:12]}... (retrain, or load without config)")
    if data is not None and data_digest(data) != meta["data_digest"]:
        raise ValueError(f"data does not match {str(path)!r}: its replicas were trained on "
                         f"data digest {meta['data_digest'][:12]}..., these data are "
                         f"{data_digest(data)[:12]}...")
    sets = meta["sets"]
    missing = sorted(({f"{kind}-{s}" for s in sets for kind in _KINDS} | {"seeds"}) - set(arrays))
    if missing:
        raise ValueError(f"path = {str(path)!r} is damaged: its metadata names sets whose "
                         f"arrays {missing[:3]} are missing")
    try:
        privacy = ReplicaPrivacy.from_dict(meta["privacy"])
    except (TypeError, ValueError) as error:
        raise ValueError(f"path = {str(path)!r} is damaged: its metadata's privacy is not a "
                         f"privacy statement ({error})") from None
    return ReplicaResult(
        models=int(meta["models"]), seeds=arrays["seeds"].astype(np.uint64),
        labels={s: arrays[f"labels-{s}"].astype(np.int64) for s in sets},
        predictions={s: arrays[f"predictions-{s}"].astype(np.int64) for s in sets},
        probabilities={s: arrays[f"probabilities-{s}"] for s in sets},
        privacy=privacy,
        config_digest=meta["config_digest"], data_digest=meta["data_digest"],
        seconds=float(meta["seconds"]), info=meta["info"], path=path)
