"""Per-client state sized by the population: in memory, or memory-mapped files on disk.

An algorithm that keeps state per client between rounds (PriFedSync's personalised helper
models h~_i, Zheng et al. 2021; the per-client optimizer states of PriFedSync and InsDP-FedAvg,
Xie et al. 2023) needs ``[N, d]`` rows for a population of ``N`` clients of a ``d``-parameter
model: 100,000 clients of the 1.2 M-parameter MNIST CNN are 480 GB per state row kind. A
:class:`ClientStore` allocates these tensors once, for the whole population, either

* **in memory** (ordinary zero tensors) when their total size is at most the store's
  ``threshold``, or
* **memory-mapped** (``torch.from_file(..., shared=True)`` over one sparse file per tensor)
  above it. A round gathers its cohort's rows (``tensor[rows]``: a copy of ``c`` rows) and
  scatters them back (``tensor[rows] = new``), so the process holds the cohort's rows plus the
  pages the kernel keeps cached, never the population.

The arithmetic is the same either way (the rows hold the same bits; gathering and scattering
copy them), so a run is **bit-identical** with a mapped and an in-memory store (tested).

Threshold: ``run.memory_budget`` when it is set, else a quarter of the free memory
(:func:`privfl.fl.chunked_cohorts.available_memory`; no 1 GiB cap: unlike a chunk, a larger store
in memory saves disk traffic).

Where the files live: :func:`state_directory` names a folder (the runner passes the run's
private ``client-state/`` folder, classified as private state in
:mod:`privfl.algorithms.outputs`); without one, a temporary folder. Each store writes into
its own subfolder ``pid-<pid>-<random>`` and removes it when the store is garbage-collected
or the process exits; a new store removes the subfolders of processes that no longer run
(a killed run). The files are never read back: checkpoints hold a copy of the state
(:meth:`ClientStore.snapshot`) and a resume fills a fresh store from it
(:meth:`ClientStore.restore`), so the store needs no digest of its own.
"""

from __future__ import annotations

import contextlib
import contextvars
import mmap
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import torch

from privfl._memory import parse_memory_budget
from privfl._validation import check_int
from privfl.fl.chunked_cohorts import available_memory

__all__ = ["ClientStore", "state_directory"]

_DIRECTORY: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "privfl_client_state_directory", default=None)
#: bytes copied at once by :meth:`ClientStore.restore` and :meth:`ClientStore.fill_rows`
_COPY_BYTES = 64 << 20


def _row_chunks(tensor: torch.Tensor) -> range:
    """Start rows of chunks of about :data:`_COPY_BYTES` (at least one row each)."""
    row = max(1, tensor[:1].numel() * tensor.element_size())
    return range(0, tensor.shape[0], max(1, _COPY_BYTES // row))


@contextlib.contextmanager
def state_directory(path: str | Path) -> Iterator[Path]:
    """Stores created inside this block put their memory-mapped files under ``path``."""
    path = Path(path)
    token = _DIRECTORY.set(path)
    try:
        yield path
    finally:
        _DIRECTORY.reset(token)


def _dont_need(mapping: mmap.mmap) -> None:
    """``madvise(MADV_DONTNEED)`` where the platform has it (Linux); else nothing."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is not None and not mapping.closed:
        mapping.madvise(advice)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale(parent: Path) -> None:
    """Remove ``pid-<pid>-*`` subfolders of ``parent`` whose process no longer runs."""
    for child in parent.glob("pid-*"):
        try:
            pid = int(child.name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            shutil.rmtree(child, ignore_errors=True)


class ClientStore:
    """Allocates the per-client tensors of one algorithm (see the module docstring).

    Parameters
    ----------
    rows
        N, the population size (first dimension of every tensor).
    threshold
        Bytes: tensors totalling more are memory-mapped; an int or a size string
        (``"512MiB"``); None: a quarter of the free memory (256 MiB when unknown).
    directory
        Parent folder of the mapped files; None: the enclosing :func:`state_directory`, else a
        temporary folder.
    """

    def __init__(self, rows: int, *, threshold: int | str | None = None,
                 directory: str | Path | None = None) -> None:
        self.rows = check_int("rows", rows, 1)
        if threshold is None:
            free = available_memory("cpu")
            threshold = (256 << 20) if free is None else free // 4
        elif isinstance(threshold, str):
            threshold = parse_memory_budget(threshold, "threshold")
        self.threshold = check_int("threshold", threshold, 0)
        directory = _DIRECTORY.get() if directory is None else Path(directory)
        self.parent = directory
        self.path: Path | None = None  # this store's folder, once a tensor is mapped
        self.mapped = False
        self.nbytes = 0
        self._mapped: set[int] = set()  # storage addresses of the mapped tensors
        self._files = 0
        self._maps: list[mmap.mmap] = []  # the allocated mappings (release())

    def allocate(self, shapes: Mapping[str, tuple[tuple[int, ...], torch.dtype]], *,
                 device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Zero tensors ``name -> [rows, *tail]`` for ``shapes = {name: (tail, dtype)}``: in
        memory (on ``device``) when their total size is at most :attr:`threshold`, else
        memory-mapped (on the CPU: gather a cohort's rows, then move them)."""
        sizes = {}
        for name, (tail, _dtype) in shapes.items():
            count = self.rows
            for n in tail:
                count *= check_int(f"shapes[{name!r}] dimension", n, 1)
            sizes[name] = count
        total = sum(sizes[name] * torch.empty((), dtype=shapes[name][1]).element_size()
                    for name in shapes)
        self.nbytes += total
        if total <= self.threshold:
            return {name: torch.zeros(self.rows, *tail, dtype=dtype, device=device)
                    for name, (tail, dtype) in shapes.items()}
        self.mapped = True
        out = {}
        for name, (tail, dtype) in shapes.items():
            out[name], _ = self._mapped_zeros(name, (self.rows, *tail), dtype)
            self._mapped.add(out[name].untyped_storage().data_ptr())
        return out

    def _mapped_zeros(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, *,
                      keep: bool = True) -> tuple[torch.Tensor, mmap.mmap | None]:
        """A zero tensor over a new sparse file of this store's folder and its mapping (None
        for a dtype numpy lacks); ``keep``: :meth:`release` drops the mapping's pages."""
        count = 1
        for n in shape:
            count *= n
        self._files += 1
        file = self._folder() / f"{self._files}-{name}.bin"
        with open(file, "wb") as handle:  # sparse: reads as zeros until written
            handle.truncate(count * torch.empty((), dtype=dtype).element_size())
        try:
            np_dtype = torch.empty((), dtype=dtype).numpy().dtype
        except TypeError:  # no numpy dtype (bfloat16): a torch mapping, never released
            return torch.from_file(str(file), shared=True, size=count,
                                   dtype=dtype).view(shape), None
        array = np.memmap(file, dtype=np_dtype, mode="r+", shape=shape)
        if keep:
            self._maps.append(array._mmap)
        return torch.from_numpy(array), array._mmap

    def release(self) -> None:
        """Drop the mapped pages from this process's resident set (``madvise(MADV_DONTNEED)``
        on the shared file mappings: written pages stay in the page cache, which writes them
        back and reclaims them; nothing is lost). Algorithms call it after each round."""
        for mapping in self._maps:
            _dont_need(mapping)

    def _folder(self) -> Path:
        if self.path is None:
            if self.parent is None:
                parent = Path(tempfile.mkdtemp(prefix="privfl-client-state-"))
                self.path = parent / f"pid-{os.getpid()}-0"
                weakref.finalize(self, shutil.rmtree, parent, True)
            else:
                self.parent.mkdir(parents=True, exist_ok=True)
                _remove_stale(self.parent)
                self.path = Path(tempfile.mkdtemp(prefix=f"pid-{os.getpid()}-",
                                                  dir=self.parent))
            self.path.mkdir(parents=True, exist_ok=True)
            weakref.finalize(self, shutil.rmtree, self.path, True)
        return self.path

    def allocate_like(self, template: Mapping[str, torch.Tensor], *,
                      device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """:meth:`allocate` with the shapes and dtypes of ``template``'s rows (``name ->
        [m, *tail]``, e.g. a one-client optimizer state)."""
        return self.allocate({name: (tuple(t.shape[1:]), t.dtype)
                              for name, t in template.items()}, device=device)

    def fill_rows(self, target: torch.Tensor, row: torch.Tensor) -> torch.Tensor:
        """Set every row of ``target`` to ``row`` in place, :data:`_COPY_BYTES` at a time
        (a mapped target's pages leave the resident set after each chunk)."""
        starts = _row_chunks(target)
        with torch.no_grad():
            for lo in starts:
                target[lo: lo + starts.step] = row.to(target.device, target.dtype)
                self.release()
        return target

    @staticmethod
    def take(tree: Mapping[str, torch.Tensor], rows, device: str | torch.device
             ) -> dict[str, torch.Tensor]:
        """Rows ``rows`` of every tensor of ``tree`` (a stacked dict), copied to ``device``."""
        index = torch.as_tensor(rows, dtype=torch.int64)
        return {name: t[index.to(t.device)].to(device) for name, t in tree.items()}

    def snapshot(self, tensor: torch.Tensor) -> torch.Tensor:
        """What a checkpoint saves: a CPU copy of ``tensor``. A mapped tensor is copied into a
        new mapped file, row chunk by row chunk, whose name is removed at once (POSIX keeps
        the data while the copy is referenced): the copy costs disk and page cache, not
        process memory, and ``torch.save`` writes it from the mapping."""
        if tensor.untyped_storage().data_ptr() not in self._mapped:
            return tensor.detach().cpu().clone()
        copy, mapping = self._mapped_zeros("snapshot", tuple(tensor.shape), tensor.dtype,
                                           keep=False)
        for file in self._folder().glob(f"{self._files}-snapshot.bin"):
            file.unlink()
        return self.restore(copy, tensor, mapping)

    def restore(self, target: torch.Tensor, saved: torch.Tensor,
                mapping: mmap.mmap | None = None) -> torch.Tensor:
        """Copy ``saved`` (a checkpoint's tensor, same shape) into ``target`` in place, at most
        :data:`_COPY_BYTES` at a time (a memory-mapped checkpoint is never read whole; the
        written pages of the store's mappings, and of ``mapping``, leave the resident set after
        each chunk);
        returns ``target``."""
        if tuple(saved.shape) != tuple(target.shape):
            raise ValueError(f"checkpoint tensor has shape {tuple(saved.shape)}: this run has "
                             f"{tuple(target.shape)} (a different model or number of clients)")
        with torch.no_grad():
            starts = _row_chunks(target)
            for lo in starts:
                target[lo: lo + starts.step] = saved[lo: lo + starts.step].to(
                    target.device, target.dtype)
                self.release()
                if mapping is not None:
                    _dont_need(mapping)
        return target

    def __repr__(self) -> str:
        where = f"mapped in {self.path}" if self.mapped else "in memory"
        return (f"ClientStore(rows={self.rows}, {self.nbytes:,} bytes {where}, "
                f"threshold={self.threshold:,})")
