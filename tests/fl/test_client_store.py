"""The per-client store (privfl.fl.client_store): in memory below its threshold, memory-mapped
above, the same bits either way; snapshots are copies; files live in their folder only while the
store does."""

from __future__ import annotations

import io
import os

import pytest
import torch

from privfl.fl.client_store import ClientStore, state_directory

SHAPES = {"local": ((7,), torch.float32), "step": ((), torch.float64)}


def _filled(store):
    rows = store.allocate(SHAPES)
    gen = torch.Generator().manual_seed(0)
    rows["local"][torch.tensor([4, 1, 9])] = torch.randn(3, 7, generator=gen)
    rows["step"][torch.tensor([1, 9])] = torch.tensor([2.0, 5.0], dtype=torch.float64)
    return rows


def test_threshold_decides_memory_or_mapping(tmp_path):
    # 10 rows x (7 float32 + 1 float64) = 360 bytes
    small = ClientStore(10, threshold=360, directory=tmp_path)
    big = ClientStore(10, threshold=359, directory=tmp_path)
    a, b = _filled(small), _filled(big)
    assert not small.mapped and big.mapped and small.nbytes == big.nbytes == 360
    assert [p.name for p in tmp_path.iterdir()] == [big.path.name]
    assert sorted(p.name for p in big.path.iterdir()) == ["1-local.bin", "2-step.bin"]
    assert os.path.getsize(big.path / "1-local.bin") == 10 * 7 * 4
    for key in SHAPES:
        assert torch.equal(a[key], b[key]), key
        assert b[key].dtype == SHAPES[key][1]
    assert int((b["local"] != 0).any(1).sum()) == 3 and float(b["step"].sum()) == 7.0
    taken = ClientStore.take(b, [9, 4], "cpu")
    assert torch.equal(taken["local"], a["local"][torch.tensor([9, 4])])


def test_snapshot_is_a_copy_that_saves_and_restores_bit_for_bit(tmp_path):
    store = ClientStore(10, threshold=0, directory=tmp_path)
    rows = _filled(store)
    snap = store.snapshot(rows["local"])
    assert torch.equal(snap, rows["local"]) and snap.data_ptr() != rows["local"].data_ptr()
    rows["local"].add_(1.0)  # the next round: the snapshot keeps the old values
    assert not torch.equal(snap, rows["local"])
    assert sorted(p.name for p in store.path.iterdir()) == ["1-local.bin", "2-step.bin"]
    buffer = io.BytesIO()
    torch.save({"local": snap}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)["local"]
    other = ClientStore(10, threshold=10**6).allocate(SHAPES)
    ClientStore(10).restore(other["local"], saved)
    assert torch.equal(other["local"], snap)
    with pytest.raises(ValueError, match=r"checkpoint tensor has shape \(10, 7\): this run has "
                                         r"\(10,\)"):
        store.restore(rows["step"], saved)


def test_files_go_with_the_store_and_stale_ones_are_removed(tmp_path):
    stale = tmp_path / "pid-999999999-abc"  # a process that no longer runs
    stale.mkdir()
    (stale / "1-local.bin").write_bytes(b"x")
    with state_directory(tmp_path):
        store = ClientStore(4, threshold=0)
    store.allocate(SHAPES)
    path = store.path
    assert path.parent == tmp_path and path.exists() and not stale.exists()
    del store
    import gc

    gc.collect()
    assert not path.exists()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"rows": 0}, r"rows = 0 is out of range"),
    ({"rows": 3, "threshold": -1}, r"threshold = -1 is out of range"),
    ({"rows": 3, "threshold": "lots"}, r"threshold = 'lots' is not allowed"),
])
def test_bad_arguments_name_themselves(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ClientStore(**kwargs)


def _resident(tensor) -> int:
    """Resident pages of the mapping that holds ``tensor`` (from /proc/self/smaps)."""
    start = tensor.untyped_storage().data_ptr()
    with open("/proc/self/smaps", encoding="ascii") as smaps:
        inside = False
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= start < hi
            elif inside and head == "Rss:":
                return int(line.split()[1]) * 1024
    raise AssertionError("mapping not found")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc")
def test_release_drops_written_pages_and_keeps_their_values(tmp_path):
    store = ClientStore(256, threshold=0, directory=tmp_path)
    local = store.allocate({"local": ((4096,), torch.float32)})["local"]  # 4 MiB
    with torch.no_grad():
        local[:] = torch.arange(256, dtype=torch.float32).unsqueeze(1)
    assert _resident(local) >= 4 << 20
    store.release()
    assert _resident(local) < 1 << 20
    assert torch.equal(local[:, 0], torch.arange(256, dtype=torch.float32))  # read back
