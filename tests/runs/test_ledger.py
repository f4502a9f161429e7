"""The release ledger (issue 44): an append-only hash chain, each entry fsynced before its
release is shown, a torn last line after a kill detected and recorded, never dropped silently."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.runs.ledger import (
    GENESIS,
    Ledger,
    LedgerError,
    creation_record,
    entry_hash,
    file_digests,
    read_entries,
    released_rounds,
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_each_entry_hashes_its_index_kind_payload_and_the_previous_hash(tmp_path):
    ledger = Ledger(tmp_path)
    first = ledger.append("creation", {"rounds": 20, "stop": {"target_accuracy": 0.6}})
    second = ledger.append("row", {"round": 1, "attempt": 0, "row": {"round": 1, "x": 0.25}})
    # an independent computation: sha256 of the canonical JSON (sorted keys, no spaces)
    assert first.prev == GENESIS == "0" * 64
    assert first.hash == _sha('{"index":0,"kind":"creation","payload":{"rounds":20,"stop":'
                              '{"target_accuracy":0.6}},"prev":"' + GENESIS + '"}')
    assert second.prev == first.hash
    assert second.hash == entry_hash(1, "row", second.payload, first.hash)
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert [json.loads(line)["hash"] for line in lines] == [first.hash, second.hash]
    assert Ledger(tmp_path).entries() == [first, second]  # read back from disk


def test_an_edited_removed_or_reordered_entry_breaks_the_chain(tmp_path):
    ledger = Ledger(tmp_path)
    for r in (1, 2, 3):
        ledger.append("row", {"round": r, "attempt": 0, "row": {"round": r, "epsilon": 0.5 * r}})
    path = tmp_path / "ledger.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0].replace('"epsilon":0.5', '"epsilon":0.001') + "".join(lines[1:]))
    with pytest.raises(LedgerError, match=r"line 1 does not match its hash \(edited\)"):
        read_entries(path)
    path.write_text(lines[0] + lines[2])
    with pytest.raises(LedgerError, match="line 2 has index 2, expected 1"):
        Ledger(tmp_path).entries()
    path.write_text(lines[1] + lines[0] + lines[2])
    with pytest.raises(LedgerError, match="line 1 has index 1, expected 0"):
        read_entries(path)


def test_a_torn_last_line_is_cut_off_and_recorded_by_repair(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.append("creation", {"rounds": 3})
    path = tmp_path / "ledger.jsonl"
    torn = b'{"hash":"ab","index":1,"kind":"row","payl'
    with open(path, "ab") as stream:  # a kill in the middle of an append
        stream.write(torn)
    entries, tail = read_entries(path)
    assert len(entries) == 1 and tail == torn
    later = Ledger(tmp_path)
    with pytest.raises(LedgerError, match="ends in a torn line"):
        later.append("row", {"round": 1})
    note = later.repair()
    assert note.startswith(f"ledger.jsonl ended in a torn line ({len(torn)} bytes")
    entries, tail = read_entries(path)
    assert tail == b"" and [e.kind for e in entries] == ["creation", "torn"]
    assert entries[1].payload == {"bytes": len(torn), "sha256": hashlib.sha256(torn).hexdigest()}
    assert later.repair() is None  # nothing left to repair


def test_a_complete_last_entry_without_its_newline_is_kept(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.append("row", {"round": 1, "attempt": 0, "row": {"round": 1}})
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # killed after the entry, before "\n"
    assert read_entries(path)[1] == b"" and len(read_entries(path)[0]) == 1
    again = Ledger(tmp_path)
    assert again.repair() is None
    again.append("row", {"round": 2, "attempt": 0, "row": {"round": 2}})
    assert [e.payload["round"] for e in Ledger(tmp_path).entries()] == [1, 2]
    assert released_rounds(tmp_path) == [1, 2]


def test_the_api_for_the_budget_and_its_validation(tmp_path):
    with pytest.raises(ValueError, match="has no creation record"):
        creation_record(tmp_path)
    ledger = Ledger(tmp_path)
    ledger.append("creation", {"rounds": 20, "privacy": {"epsilon_budget": 2.0}})
    assert creation_record(tmp_path)["privacy"] == {"epsilon_budget": 2.0}
    ledger.append("row", {"round": 2, "attempt": 0, "row": {}})
    ledger.append("row", {"round": 1, "attempt": 1, "row": {}})
    assert released_rounds(tmp_path) == [1, 2] and ledger.released_round() == 2
    with pytest.raises(ValueError, match="kind = 'rows' is not allowed"):
        ledger.append("rows", {})
    with pytest.raises(ValueError, match="payload = list is not allowed"):
        ledger.append("row", [1])
    (tmp_path / "a.txt").write_text("a")
    assert file_digests(tmp_path) == {"a.txt": _sha("a")}  # the ledger itself is not listed


@settings(max_examples=40, deadline=None)
@given(payloads=st.lists(st.dictionaries(st.text(max_size=4), st.one_of(
           st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6)),
           max_size=3), min_size=1, max_size=4),
       where=st.floats(0, 1, exclude_max=True), byte=st.integers(0, 255))
def test_no_single_byte_change_of_a_value_goes_unnoticed(tmp_path_factory, payloads, where, byte):
    folder = tmp_path_factory.mktemp("ledger")
    ledger = Ledger(folder)
    for payload in payloads:
        ledger.append("row", {"round": 1, "row": payload})
    path = folder / "ledger.jsonl"
    data = bytearray(path.read_bytes())
    before = read_entries(path)[0]
    assert [e.payload["row"] for e in before] == json.loads(json.dumps(payloads))
    at = int(where * len(data))
    data[at] = byte
    path.write_bytes(bytes(data))
    try:
        entries, torn = read_entries(path)
    except LedgerError:
        return
    # else the change left every value as it was (the case of a hex digit of a JSON unicode
    # escape), or it sits in the last line(s), read as torn: never a changed entry as valid
    assert entries == before or (torn and entries == before[:len(entries)])
