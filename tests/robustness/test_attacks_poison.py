"""Data poisoning of a FederatedDataset (Xie et al. 2023 Section 5): who is poisoned, how, and
the attack test set; the ``attack`` configuration section (numpy only, fast)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.attacks.config import AttackConfig
from privfl.attacks.poisoning import attack_card_rows, attack_of, attack_test_set, poison
from privfl.attacks.triggers import Trigger
from privfl.config import ConfigError, config_from_dict
from privfl.data import Dataset, federate_iid, synthetic_dataset

CLIENTS, SIZE = 6, 30


@pytest.fixture(scope="module")
def clean():
    """6 IID clients of 30 records (3 classes, 1 x 28 x 28), 10 test records each."""
    full = synthetic_dataset(300, 3, (1, 28, 28), seed=2)
    train, test = full.split(0.25, seed=2)
    return federate_iid(train, test, num_clients=CLIENTS, size=SIZE, test_size=10, seed=2)


def _records(data, j):
    idx = data.train_indices[j]
    return data.train.x[idx], data.train.y[idx]


def _mask():
    return Trigger.from_pattern("paper").mask(28, 28)


def _assert_untouched(clean, poisoned, skip=()):
    n = len(clean.train)
    assert np.array_equal(poisoned.train.x[:n], clean.train.x)  # the clean pool is kept
    assert np.array_equal(poisoned.train.y[:n], clean.train.y)
    assert poisoned.test is clean.test and poisoned.test_indices == clean.test_indices
    assert np.array_equal(poisoned.client_sizes, clean.client_sizes)  # n_j unchanged
    for j in range(clean.num_clients):
        if j not in skip:
            assert np.array_equal(poisoned.train_indices[j], clean.train_indices[j])


@pytest.mark.parametrize("k", [0, 1, 3, CLIENTS])
def test_user_level_backdoor_poisons_every_record_of_exactly_k_clients(clean, k):
    poisoned, what = poison(clean, {"kind": "backdoor", "attackers": k}, seed=5)
    assert len(what.clients) == k == len(set(what.clients))
    assert attack_of(poisoned) is what
    _assert_untouched(clean, poisoned, skip=what.clients)
    trig = _mask()
    for j in what.clients:
        x, y = _records(poisoned, j)
        x0, _ = _records(clean, j)
        assert np.all(y == 0) and what.records[j].size == SIZE
        assert np.all(x[:, 0, trig] == 1.0)  # every record carries the whole trigger
        assert np.array_equal(x[:, :, ~trig], x0[:, :, ~trig])  # and nothing else changed
        assert poisoned.train_indices[j].min() >= len(clean.train)  # copies, appended
    assert len(poisoned.train) == len(clean.train) + k * SIZE
    assert what.poisoned_records == k * SIZE


def test_fraction_poisons_floor_of_alpha_n_records_per_attacker(clean):
    poisoned, what = poison(clean, {"kind": "backdoor", "attackers": 2, "fraction": 0.5})
    for j in what.clients:
        assert what.records[j].size == SIZE // 2
        changed = poisoned.train_indices[j] != clean.train_indices[j]
        assert np.array_equal(np.flatnonzero(changed), what.records[j])
    _assert_untouched(clean, poisoned, skip=what.clients)


@pytest.mark.parametrize("k", [0, 1, 7, SIZE])
def test_instance_level_poisons_exactly_k_records_of_one_client(clean, k):
    poisoned, what = poison(clean, {"kind": "backdoor", "level": "instance", "attackers": k},
                            seed=1)
    (j,) = what.clients
    positions = what.records[j]
    assert positions.size == k == np.unique(positions).size
    _assert_untouched(clean, poisoned, skip=(j,))
    changed = np.flatnonzero(poisoned.train_indices[j] != clean.train_indices[j])
    assert np.array_equal(changed, positions)  # only those k; the client keeps its n_j records
    x, y = _records(poisoned, j)
    assert np.all(y[positions] == 0) and np.all(x[positions][:, 0, _mask()] == 1.0)
    assert not what.is_attacker(np.arange(CLIENTS)).any()  # an honest DP-SGD client


def test_attackers_and_records_are_nested_in_k_and_follow_the_seed(clean):
    sets = [poison(clean, {"kind": "backdoor", "attackers": k}, seed=9)[1].clients
            for k in range(1, CLIENTS + 1)]
    for small, large in zip(sets[:-1], sets[1:], strict=True):
        assert large[: len(small)] == small
    again = poison(clean, {"kind": "backdoor", "attackers": 3}, seed=9)[1].clients
    assert again == sets[2]
    assert len({poison(clean, {"kind": "backdoor", "attackers": 3}, seed=s)[1].clients
                for s in range(8)}) > 1
    override = poison(clean, {"kind": "backdoor", "attackers": 3, "seed": 9}, seed=123)[1]
    assert override.clients == sets[2] and override.seed == 9
    records = [poison(clean, {"kind": "label-flip", "level": "instance", "attackers": k},
                      seed=4)[1] for k in (2, 5)]
    assert records[0].clients == records[1].clients
    j = records[0].clients[0]
    assert set(records[0].records[j]) <= set(records[1].records[j])
    chosen = poison(clean, {"kind": "backdoor", "attackers": 2, "clients": [4, 1]})[1]
    assert chosen.clients == (4, 1)


def test_label_flip_changes_labels_of_non_target_records_only(clean):
    poisoned, what = poison(clean, {"kind": "label-flip", "attackers": 2}, seed=3)
    assert what.trigger is None
    for j in what.clients:
        x, y = _records(poisoned, j)
        x0, y0 = _records(clean, j)
        assert np.array_equal(x, x0)  # features unchanged
        assert np.all(y == 0)  # every record now says the target
        assert np.array_equal(what.records[j], np.flatnonzero(y0 != 0))  # the flipped ones
    source, what = poison(clean, {"kind": "label-flip", "attackers": 2, "source_label": 2})
    for j in what.clients:
        y, y0 = _records(source, j)[1], _records(clean, j)[1]
        assert np.array_equal(y, np.where(y0 == 2, 0, y0))  # class 1 left alone


def test_dba_gives_attacker_j_piece_j_and_the_union_is_the_whole_trigger(clean):
    poisoned, what = poison(clean, {"kind": "dba", "attackers": 3}, seed=0)
    assert len(what.pieces) == 3
    stamped = []
    for rank, j in enumerate(what.clients):
        x = _records(poisoned, j)[0]
        piece = what.pieces[rank].mask(28, 28)
        assert np.all(x[:, 0, piece] == 1.0)
        x0 = _records(clean, j)[0]
        assert np.array_equal(x[:, :, ~piece], x0[:, :, ~piece])  # no other trigger pixel
        stamped.append(piece)
    assert np.array_equal(np.logical_or.reduce(stamped), _mask())
    # the test set carries the whole (global) trigger
    assert np.all(what.test.x[:, 0, _mask()] == 1.0)
    # instance level: record i stamps piece i mod pieces
    inst, what = poison(clean, {"kind": "dba", "level": "instance", "attackers": 5,
                                "pieces": 2}, seed=0)
    (j,) = what.clients
    x = _records(inst, j)[0]
    for i, position in enumerate(what.records[j]):
        piece = what.pieces[i % 2].mask(28, 28)
        assert np.all(x[position, 0, piece] == 1.0)
        assert not np.all(x[position, 0, what.pieces[1 - i % 2].mask(28, 28)] == 1.0)


def test_attack_test_sets(clean):
    test = clean.test
    backdoor, rows = attack_test_set(test, AttackConfig(kind="backdoor", target_label=1))
    assert np.array_equal(rows, np.flatnonzero(test.y != 1))
    assert len(backdoor) == int((test.y != 1).sum()) and np.all(backdoor.y == 1)
    trig = _mask()
    assert np.all(backdoor.x[:, 0, trig] == 1.0)
    assert np.array_equal(backdoor.x[:, :, ~trig], test.x[rows][:, :, ~trig])
    flip, rows = attack_test_set(test, AttackConfig(kind="label-flip", source_label=2))
    assert np.array_equal(rows, np.flatnonzero(test.y == 2))
    assert np.array_equal(flip.x, test.x[rows]) and np.all(flip.y == 0)  # no trigger


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["backdoor", "label-flip", "dba", "scaling"]),
       level=st.sampled_from(["user", "instance"]), k=st.integers(0, CLIENTS),
       seed=st.integers(0, 2**32 - 1))
def test_poisoning_changes_only_what_it_reports(clean, kind, level, k, seed):
    if level == "instance" and kind == "scaling":
        return
    poisoned, what = poison(clean, {"kind": kind, "level": level, "attackers": k}, seed=seed)
    _assert_untouched(clean, poisoned, skip=what.clients)
    changed = 0
    for j in what.clients:
        moved = np.flatnonzero(poisoned.train_indices[j] != clean.train_indices[j])
        assert np.array_equal(moved, what.records[j])
        changed += moved.size
        assert np.all(_records(poisoned, j)[1][moved] == 0)
    assert changed == what.poisoned_records == len(poisoned.train) - len(clean.train)
    if level == "instance":
        assert changed == k


def test_card_row_says_the_accounting_is_unchanged(clean):
    _, what = poison(clean, {"kind": "scaling", "attackers": 2})
    (row,) = attack_card_rows(what).values()
    assert "updates x gamma = 50" in row and "accounting is unchanged" in row
    assert attack_card_rows(AttackConfig()) == {}
    assert "k = 4 poisoned record(s)" in attack_card_rows(
        AttackConfig(kind="backdoor", level="instance", attackers=4))["attack (simulated)"]


@pytest.mark.parametrize(
    ("attack", "message"),
    [
        ({"kind": "backdoor", "attackers": 7}, "attack.attackers = 7 is out of range: must be "
         "<= 6"),
        ({"kind": "backdoor", "level": "instance", "attackers": 31}, "attack.attackers = 31 is "
         "out of range: must be <= 30"),
        ({"kind": "label-flip", "level": "instance", "attackers": 29, "clients": [0]},
         "poisonable records of client 0"),
        ({"kind": "backdoor", "target_label": 3}, "attack.target_label = 3 is out of range"),
        ({"kind": "label-flip", "source_label": 5}, "attack.source_label = 5 is out of range"),
        ({"kind": "backdoor", "attackers": 1, "fraction": 0.01}, "attack.fraction = 0.01 "
         "poisons no record"),
        ({"kind": "backdoor", "attackers": 1, "clients": [6]}, "attack.clients = [6] is out "
         "of range"),
        ({"kind": "none"}, "attack.kind = 'none' is not allowed here"),
        ({"kind": "backdoor", "trigger": {"pattern": "custom", "pixels": [[30, 1]]}},
         "does not fit images of 28 x 28"),
    ],
)
def test_bad_attacks_fail_with_one_line(clean, attack, message):
    with pytest.raises(ValueError) as error:
        poison(clean, attack)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_poisoning_twice_is_refused(clean):
    poisoned, _ = poison(clean, {"kind": "backdoor"})
    with pytest.raises(ValueError, match="already poisoned"):
        poison(poisoned, {"kind": "backdoor"})


# ------------------------------------------------------------------ the configuration section
BASE = {"federated": {"algorithm": "dp-fedavg"}, "privacy": {"noise_multiplier": 1.0},
        "data": {"clients": 5, "partition": "iid", "train_size": 40}}


def _config(attack, **overrides):
    return config_from_dict({**BASE, **overrides, "attack": attack})


def test_config_defaults_and_resolved_values():
    assert _config({}).attack.active is False
    attack = _config({"kind": "scaling", "attackers": 2}).attack
    assert attack.gamma == 50.0 and attack.level == "user"
    assert _config({"kind": "backdoor"}).attack.gamma == 1.0
    assert _config({"kind": "dba", "attackers": 3}).attack.dba_pieces == 3
    assert _config({"kind": "backdoor", "attackers": 5}).attack.attackers == 5
    assert _config({"kind": "backdoor", "attackers": 0, "clients": []}).attack.clients == []
    # a dumped config (every key written out) validates again
    dumped = _config({"kind": "label-flip", "level": "instance", "attackers": 4})
    again = config_from_dict(dumped.model_dump(mode="json"))
    assert again.attack == dumped.attack


@pytest.mark.parametrize(
    ("attack", "overrides", "message"),
    [
        ({"kind": "backdoor", "attackers": 6}, {}, "attack.attackers = 6 is out of range: must "
         "be <= data.clients = 5"),
        ({"kind": "backdoor", "level": "instance", "attackers": 41}, {}, "attack.attackers = 41 "
         "is out of range: must be <= the attacker client's records (40"),
        ({"kind": "backdoor", "attackers": -1}, {}, "attack.attackers = -1 is out of range"),
        ({"kind": "trojan"}, {}, "attack.kind = 'trojan' is not allowed"),
        ({"attackers": 2}, {}, "attack.attackers is set but attack.kind = 'none'"),
        ({"kind": "scaling", "level": "instance"}, {}, "not allowed with attack.level = "
         "'instance'"),
        ({"kind": "backdoor", "level": "instance", "fraction": 0.5}, {}, "attack.fraction is not "
         "allowed"),
        ({"kind": "backdoor", "source_label": 1}, {}, "attack.source_label is not allowed"),
        ({"kind": "label-flip", "source_label": 0}, {}, "must differ from attack.target_label"),
        ({"kind": "label-flip", "trigger": {"value": 0.5}}, {}, "attack.trigger is not allowed"),
        ({"kind": "dba", "attackers": 4, "pieces": 16}, {}, "attack.pieces = 16 is out of range"),
        ({"kind": "backdoor", "pieces": 2}, {}, "attack.pieces is not allowed"),
        ({"kind": "backdoor", "attackers": 2, "clients": [1]}, {}, "attack.clients = [1] is not "
         "allowed"),
        ({"kind": "backdoor", "attackers": 1, "clients": [9]}, {}, "attack.clients = [9] is out "
         "of range"),
        ({"kind": "backdoor", "fraction": 0}, {}, "attack.fraction = 0 is out of range"),
        ({"kind": "backdoor", "scale": 0}, {}, "attack.scale = 0 is out of range"),
        ({"kind": "backdoor", "trigger": {"pattern": "custom"}}, {},
         "attack.trigger.pixels = None is not allowed"),
        ({"kind": "scaling"}, {"federated": {"algorithm": "prifedsync"},
                               "privacy": {"sigma": 1.0}},
         "attack.kind = 'scaling' is not supported by federated.algorithm = 'prifedsync': "
         "update scaling needs a server that clips"),
        ({"kind": "scaling"}, {"federated": {"algorithm": "insdp-fedavg"}},
         "attack.kind = 'scaling' is not supported by federated.algorithm = 'insdp-fedavg'"),
        ({"kind": "backdoor", "scale": 10}, {"federated": {"algorithm": "insdp-fedsgd"}},
         "attack.scale = 10 is not supported"),
        ({"kind": "backdoor", "colour": 1}, {}, "attack.colour is not a known key"),
    ],
)
def test_bad_config_sections_fail_with_one_line(attack, overrides, message):
    with pytest.raises(ConfigError) as error:
        _config(attack, **overrides)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("kind", ["backdoor", "dba", "scaling"])
def test_a_trigger_needs_images(kind):
    rng = np.random.default_rng(0)
    train, test = Dataset(rng.normal(size=(120, 6)), np.arange(120) % 3).split(0.25, seed=0)
    tabular = federate_iid(train, test, num_clients=3, test_size=5, seed=0)
    with pytest.raises(ValueError, match=rf"attack.kind = '{kind}' writes a pixel trigger into "
                       r"images \(C, H, W\): the data have inputs of shape \(6,\)"):
        poison(tabular, {"kind": kind})
    with pytest.raises(ValueError, match="a pixel trigger needs images"):
        Trigger.from_pattern("paper").stamp(tabular.train.x)
    flipped, _ = poison(tabular, {"kind": "label-flip", "attackers": 1})  # labels only: fine
    assert flipped.input_shape == (6,)
