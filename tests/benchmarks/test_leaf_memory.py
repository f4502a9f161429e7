"""benchmarks/leaf_memory.py: reading a LEAF split as natural users takes memory for its records,
not for its users (tracemalloc peaks of the same records over 20 and 2,000 users)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from privfl.data.natural import load_leaf_natural

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "leaf_memory.py"


def _benchmark():
    spec = importlib.util.spec_from_file_location("privfl_bench_leaf_memory", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_peak_memory_is_flat_in_the_number_of_users(tmp_path):
    bench = _benchmark()
    peaks = {}
    for users in (20, 2000):
        root = bench.write_shakespeare(tmp_path / str(users), 4000, users, files=2)
        peak, kept = bench.peak_bytes(root)
        peaks[users] = peak
        assert kept == (4000 + 2000) * (80 + 1) * 8  # int64 ids: 80 inputs and 1 target
        # the pooled arrays, one parsed file and per-user index arrays; not the whole split
        assert peak < 2.0 * kept
    # measured 1.03-1.11 (about 300 bytes a user: two index arrays and an id)
    assert peaks[2000] / peaks[20] < 1.25
    data = load_leaf_natural("shakespeare", tmp_path / "2000")
    assert data.num_clients == 2000 and data.client_sizes.sum() == 4000
    assert np.all(data.test_sizes >= 1)


def test_femnist_pixels_become_float32_while_a_file_is_parsed(tmp_path):
    """Each writer's pixels are converted as its JSON object closes (``convert_x``), so a parsed
    file's Python floats (about 38 bytes a number) never all live at once: measured peak 2.1 x
    the pooled arrays (5.3 x when the whole file was parsed first)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
    from _leaf_files import femnist_users, leaf_file, write_split

    users = [f"w{k}" for k in range(20)]
    write_split(tmp_path, "femnist", [leaf_file(femnist_users(users[:10], [100] * 10, 1)),
                                      leaf_file(femnist_users(users[10:], [100] * 10, 2))],
                [leaf_file(femnist_users(users, [10] * 20, 3))])
    peak, data = _benchmark().peak_read(tmp_path, "femnist")
    kept = data.train.x.nbytes + data.test.x.nbytes
    assert kept == (2000 + 200) * 784 * 4
    assert peak < 3.0 * kept
