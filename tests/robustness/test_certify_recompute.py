"""privfl certify recompute trusts nothing it can re-derive: the privacy from the stored
configuration through the accountant, the attacked sets' configurations, the metadata's
digest; damaged metadata and a damaged certify.json are one-line errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml
from test_certify_command import TINY
from typer.testing import CliRunner

from privfl.cli.main import app
from privfl.robustness import replica_cache


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One certification of TINY: M = 4 models, a backdoor with 1 attacker."""
    root = tmp_path_factory.mktemp("recompute")
    path = root / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    out = root / "cert"
    result = CliRunner().invoke(app, ["certify", str(path), "--models", "4", "--attack",
                                      "backdoor", "--attackers", "1", "--out", str(out),
                                      "--json"])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def copy(run_dir, tmp_path):
    target = tmp_path / "cert"
    shutil.copytree(run_dir, target)
    return target


def _rewrite(path, change, *, redigest=True):
    """Rewrite a replica file's metadata with ``change(meta)``; its digest recomputed (what a
    forger would do) unless ``redigest`` is False."""
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files}
    meta = change(json.loads(str(arrays.pop("meta"))))
    digest = getattr(replica_cache, "_meta_digest", None)  # None before metadata digests
    if redigest and isinstance(meta, dict) and digest is not None:
        meta["meta_sha256"] = digest(meta)
    arrays["meta"] = np.array(json.dumps(meta))
    with open(path, "wb") as stream:
        np.savez_compressed(stream, **arrays)


def _refused(directory, tmp_path, fragment):
    result = CliRunner().invoke(app, ["certify", "recompute", str(directory), "--out",
                                      str(tmp_path / "again")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def _set_privacy(key, value):
    def change(meta):
        meta["privacy"][key] = value
        return meta
    return change


def test_recompute_accepts_the_untouched_run(copy, tmp_path):
    result = CliRunner().invoke(app, ["certify", "recompute", str(copy), "--out",
                                      str(tmp_path / "again"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    first = json.loads((copy / "certify.json").read_text())
    for key in ("certified_accuracy", "inefficacy", "inefficacy_cross_entropy", "measured",
                "measured_cross_entropy", "adversary", "privacy"):
        assert data[key] == first[key], key


@pytest.mark.parametrize(("key", "value"), [
    ("epsilon", 0.001), ("delta", 0.0), ("unit", "record"), ("neighbouring", "add-remove")])
def test_edited_privacy_with_a_recomputed_digest_is_refused(copy, tmp_path, key, value):
    """The issue: epsilon 12.2 -> 0.001 certified up to k = 40; delta 0 and unit record were
    accepted. Now the accountant's value for the stored configuration is compared."""
    _rewrite(copy / "replicas" / "clean" / "replicas.npz", _set_privacy(key, value))
    _refused(copy, tmp_path, f"the stored privacy {key} = {value!r} differs from")


def test_edited_metadata_without_its_digest_is_refused(copy, tmp_path):
    _rewrite(copy / "replicas" / "clean" / "replicas.npz", _set_privacy("epsilon", 0.001),
             redigest=False)
    _refused(copy, tmp_path, "the SHA-256 of its metadata differs from the digest")


def test_an_edited_configuration_is_refused(copy, tmp_path):
    def change(meta):
        meta["info"]["config"]["privacy"]["noise_multiplier"] = 50.0
        return meta
    _rewrite(copy / "replicas" / "clean" / "replicas.npz", change)
    _refused(copy, tmp_path, "the stored configuration does not match its digest")


def test_the_clean_set_in_place_of_the_attacked_one_is_refused(copy, tmp_path):
    shutil.copy(copy / "replicas" / "clean" / "replicas.npz",
                copy / "replicas" / "attack-1" / "replicas.npz")
    _refused(copy, tmp_path, "certify.json says 'backdoor' with 1")


@pytest.mark.parametrize(("change", "fragment"), [
    (lambda meta: [meta], "its metadata is a JSON list, not an object"),
    (lambda meta: {k: v for k, v in meta.items() if k != "sha256"}, "has no 'sha256'"),
    (lambda meta: {k: v for k, v in meta.items() if k != "privacy"}, "has no 'privacy'"),
    (lambda meta: {**meta, "privacy": {"epsilon": 1.0}}, "its metadata's privacy is not a"),
    (lambda meta: {**meta, "sets": ["test", "other"]}, "names sets whose arrays"),
    (lambda meta: {**meta, "info": {**meta["info"], "config": {
        **meta["info"]["config"], "attack": None}}},
     "stores an invalid configuration: attack = None is not allowed"),
])
def test_damaged_replica_metadata_is_one_line(copy, tmp_path, change, fragment):
    _rewrite(copy / "replicas" / "clean" / "replicas.npz", change)
    _refused(copy, tmp_path, fragment)


@pytest.mark.parametrize(("attack", "fragment"), [
    (None, "attack = None is not allowed: must be a mapping"),
    ({"kind": "backdoor", "attackers": 1.5}, "attack.attackers = 1.5 is out of range"),
    ({"kind": "backdoor", "attackers": -1}, "attack.attackers = -1 is out of range"),
    ({"kind": "backdoor", "attackers": "2"}, "attack.attackers = '2' is out of range"),
    ({"kind": "backdoor", "attackers": True}, "attack.attackers = True is out of range"),
    ({"kind": None, "attackers": 1}, "attack.attackers = 1 is not allowed without"),
])
def test_a_damaged_certify_json_is_one_line(copy, tmp_path, attack, fragment):
    source = copy / "certify.json"
    about = json.loads(source.read_text())
    about["attack"] = attack
    source.write_text(json.dumps(about))
    _refused(copy, tmp_path, fragment)


def test_an_old_replica_format_is_refused_with_a_reason(copy, tmp_path):
    _rewrite(copy / "replicas" / "clean" / "replicas.npz",
             lambda meta: {**meta, "format": "privfl-replicas/1"})
    _refused(copy, tmp_path, "written before the metadata carried a digest")
