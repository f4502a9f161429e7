"""Peak memory of reading a LEAF split as natural users, against the number of users.

The same records (a Shakespeare-format split, ``--records`` lines of 80 characters in
``--files`` JSON files) are spread over 10 to 10,000 users; privfl reads them file by file
(:mod:`privfl.data.natural`). Python's ``tracemalloc`` measures the peak of the read (numpy
arrays included); the baseline, measured in the same run, is the read with the fewest users.
Memory flat in the number of users means ratios near 1; the bytes per record say what the
pooled arrays and one parsed file cost.

    PYTHONPATH=src python benchmarks/leaf_memory.py [--records 20000] [--files 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from privfl.data.natural import load_leaf_natural
from privfl.data.text import SHAKESPEARE_CHARACTERS


def write_shakespeare(root: Path, records: int, users: int, files: int, seed: int = 0) -> Path:
    """A Shakespeare-format LEAF split of ``records`` train (and ``records // 2`` test) lines
    over ``users`` users (at most ``records // 2``) in ``files`` files per split."""
    if not 1 <= users <= records // 2:
        raise ValueError(f"users = {users} is out of range: must be in [1, {records // 2}]")
    rng = np.random.default_rng(seed)
    alphabet = np.array(list(SHAKESPEARE_CHARACTERS))
    for split, total in (("train", records), ("test", records // 2)):
        owner = np.sort(np.concatenate([np.arange(users), rng.integers(0, users, total - users)]))
        folder = root / "shakespeare" / "data" / split
        folder.mkdir(parents=True, exist_ok=True)
        for k, part in enumerate(np.array_split(np.arange(users), files)):
            content = {"users": [], "num_samples": [], "user_data": {}}
            for u in part:
                n = int((owner == u).sum())
                text = "".join(rng.choice(alphabet, size=n + 80))
                name = f"user{u:06d}"
                content["users"].append(name)
                content["num_samples"].append(n)
                content["user_data"][name] = {"x": [text[i:i + 80] for i in range(n)],
                                              "y": [text[i + 80] for i in range(n)]}
            (folder / f"part_{k}.json").write_text(json.dumps(content))
    return root


def peak_read(root: Path, name: str = "shakespeare") -> tuple[int, Any]:
    """``(peak traced bytes while reading, the dataset read)``: LEAF split ``name`` in ``root``."""
    tracemalloc.start()
    try:
        data = load_leaf_natural(name, root)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, data


def peak_bytes(root: Path) -> tuple[int, int]:
    """``(peak traced bytes while reading, bytes of the pooled arrays kept)``."""
    peak, data = peak_read(root)
    kept = sum(a.nbytes for a in (data.train.x, data.train.y, data.test.x, data.test.y))
    return peak, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--users", type=int, nargs="+", default=[10, 100, 1000, 10_000])
    args = parser.parse_args()
    print(f"LEAF Shakespeare split, {args.records} train records in {args.files} files per split")
    print(f"{'users':>7} {'file MiB':>9} {'peak MiB':>9} {'arrays MiB':>11} {'vs fewest':>10}")
    baseline = None
    for users in args.users:
        with tempfile.TemporaryDirectory() as scratch:
            root = write_shakespeare(Path(scratch), args.records, users, args.files)
            size = max(p.stat().st_size for p in root.rglob("*.json"))
            peak, kept = peak_bytes(root)
        baseline = baseline or peak
        print(f"{users:>7} {size / 2**20:>9.1f} {peak / 2**20:>9.1f} {kept / 2**20:>11.1f} "
              f"{peak / baseline:>10.2f}")


if __name__ == "__main__":
    main()
