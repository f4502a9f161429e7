"""Test sets chosen by the clients' training labels (issue 34, item 4): accuracies on them read
private training data, so they are outside the guarantee, and a stop on them is refused."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from privfl.config import ConfigError, config_from_dict
from privfl.data import Dataset, federate_dirichlet, federate_shards, matched_test_indices
from privfl.runs.experiment import Experiment


def _pools(seed=0):
    rng = np.random.default_rng(seed)
    y_train = np.repeat(np.arange(10), 40)  # 400 records, 40 per label
    y_test = np.repeat(np.arange(10), 30)
    x_train = rng.normal(size=(400, 1, 2, 2)).astype(np.float32)
    x_test = rng.normal(size=(300, 1, 2, 2)).astype(np.float32)
    return (Dataset(x_train, y_train, "toy/train", 10, normalized=True),
            Dataset(x_test, y_test, "toy/test", 10, normalized=True))


def _test_labels(data, client=0):
    labels, counts = np.unique(data.test.y[data.test_indices[client]], return_counts=True)
    return dict(zip(labels.tolist(), counts.tolist(), strict=True))


def test_one_training_record_changes_a_shards_clients_test_set():
    from privfl.data.partition import TEST_FROM_TRAIN_LABELS

    train, test = _pools()
    data = federate_shards(train, test, num_clients=10, shards_per_client=2, test_size=100,
                           seed=3)
    assert data.info[TEST_FROM_TRAIN_LABELS] is True
    before = _test_labels(data)
    held = np.unique(train.y[data.train_indices[0]]).tolist()
    assert held == sorted(before) and len(held) == 2
    missing = next(label for label in range(10) if label not in held)
    # the neighbouring dataset: one of client 0's records replaced by a record of another label
    y = train.y.copy()
    y[data.train_indices[0][0]] = missing
    neighbour = Dataset(train.x, y, "toy/train", 10, normalized=True)
    rng = np.random.default_rng(1)
    old = matched_test_indices(data.train_indices, train.y, test.y, 100, seed=rng)
    new = matched_test_indices(data.train_indices, neighbour.y, test.y, 100,
                               seed=np.random.default_rng(1))
    assert set(np.unique(test.y[old[0]]).tolist()) == set(held)
    assert set(np.unique(test.y[new[0]]).tolist()) == {*held, missing}


def test_only_public_test_sampling_leaves_the_flag_off():
    from privfl.data.partition import TEST_FROM_TRAIN_LABELS

    train, test = _pools()
    public = federate_dirichlet(train, test, num_clients=4, train_size=50, test_size=20,
                                test_sampling="proportions", seed=0)
    private = federate_dirichlet(train, test, num_clients=4, train_size=50, test_size=20,
                                 test_sampling="train-labels", seed=0)
    assert public.info[TEST_FROM_TRAIN_LABELS] is False
    assert private.info[TEST_FROM_TRAIN_LABELS] is True


def _shards(raw, **stop):
    raw = copy.deepcopy(raw)
    raw["data"].update(partition="shards", shards_per_client=2)
    raw["privacy"]["accountants"] = ["gdp-clt"]
    raw["federated"]["rounds"] = 1
    raw["stop"] = stop
    return config_from_dict(raw)


ACCURACIES = ("personalised_accuracy", "global_accuracy", "personalised_accuracy_cohort")


def test_accuracies_on_label_matched_test_sets_are_outside_the_guarantee(tmp_path,
                                                                         tiny_config_dict):
    result = Experiment.create(_shards(tiny_config_dict), tmp_path / "shards").run()
    saved = json.loads((tmp_path / "shards" / "privacy.json").read_text())
    outputs = {o["name"]: o for o in saved["outputs"]}
    for key in ACCURACIES:
        assert outputs[key]["covered"] is False, key
        assert "chosen by the clients' training labels" in outputs[key]["reason"]
    # the files that show them are outside too
    assert outputs["accuracy.png"]["covered"] is False
    assert "personalised_accuracy" in outputs["accuracy.png"]["reason"]
    assert result.summary["outputs"] == saved["outputs"]
    # the same run on an IID partition (test sets from the seed only): covered
    iid = copy.deepcopy(tiny_config_dict)
    iid["privacy"]["accountants"], iid["federated"]["rounds"] = ["gdp-clt"], 1
    Experiment.create(config_from_dict(iid), tmp_path / "iid").run()
    saved = json.loads((tmp_path / "iid" / "privacy.json").read_text())
    outputs = {o["name"]: o for o in saved["outputs"]}
    assert all(outputs[key]["covered"] is True for key in ACCURACIES)


def test_a_target_stop_on_a_label_matched_accuracy_is_refused(tmp_path, tiny_config_dict):
    config = _shards(tiny_config_dict, target_accuracy=0.5)
    with pytest.raises(ConfigError, match=r"stop.target_accuracy = 0.5 is not allowed here: the "
                       r"stop would read personalised_accuracy, which is outside the guarantee "
                       r"\(measured on test sets chosen by the clients' training labels"):
        Experiment.create(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    # a non-private run has no guarantee to protect: its target stop stays
    raw = copy.deepcopy(tiny_config_dict)
    raw["data"].update(partition="shards", shards_per_client=2)
    raw["privacy"] = {"enabled": False}
    raw["stop"] = {"target_accuracy": 1e-9}
    result = Experiment.create(config_from_dict(raw), tmp_path / "baseline").run()
    assert result.stop_reason == "target"


# ---------------------------------------------------------------- client_test: seed-labels
# (issue 45, item 2): the main job's test sets read no training record, so its accuracies are
# inside its guarantee


def test_shard_labels_are_the_equal_count_labels_of_each_shard():
    from privfl.data.partition import shard_labels

    assert [shard_labels(s, 20, 10) for s in range(20)] == [[s // 2] for s in range(20)]
    # 3 shards of 2 classes: class 0 fills shards [0, 1.5), class 1 [1.5, 3)
    assert [shard_labels(s, 3, 2) for s in range(3)] == [[0], [0, 1], [1]]
    # more classes than shards: each shard holds a run of classes, together every class once
    spans = [shard_labels(s, 4, 10) for s in range(4)]
    assert spans == [[0, 1, 2], [2, 3, 4], [5, 6, 7], [7, 8, 9]]
    with pytest.raises(ValueError, match=r"shard = 4 is out of range: must be < num_shards = 4"):
        shard_labels(4, 4, 10)


def test_seed_label_test_sets_ignore_the_training_labels():
    """The neighbour of the first test (one of client 0's records relabelled) gets the same
    test sets under seed-labels, and the same training partition as train-labels."""
    from privfl.data.partition import TEST_FROM_TRAIN_LABELS

    train, test = _pools()
    data = federate_shards(train, test, num_clients=10, shards_per_client=2, test_size=100,
                           client_test="seed-labels", seed=3)
    assert data.info[TEST_FROM_TRAIN_LABELS] is False
    matched = federate_shards(train, test, num_clients=10, shards_per_client=2, test_size=100,
                              seed=3)
    for ours, theirs in zip(data.train_indices, matched.train_indices, strict=True):
        np.testing.assert_array_equal(ours, theirs)
    # 40 records per label, 20 shards of 20: the nominal labels are the real ones here
    for client in range(10):
        assert sorted(_test_labels(data, client)) == np.unique(
            train.y[data.train_indices[client]]).tolist()
    y = train.y.copy()
    y[data.train_indices[0][0]] = next(label for label in range(10)
                                       if label not in _test_labels(data))
    neighbour = federate_shards(Dataset(train.x, y, "toy/train", 10, normalized=True), test,
                                num_clients=10, shards_per_client=2, test_size=100,
                                client_test="seed-labels", seed=3)
    for ours, theirs in zip(data.test_indices, neighbour.test_indices, strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_client_test_takes_two_rules():
    with pytest.raises(ValueError, match=r"client_test = 'nominal' is not allowed"):
        federate_shards(*_pools(), num_clients=10, client_test="nominal")


def test_accuracies_on_seed_label_test_sets_are_covered(tmp_path, tiny_config_dict):
    config = _shards(tiny_config_dict)
    config = config.model_copy(update={"data": config.data.model_copy(
        update={"client_test": "seed-labels"})})
    result = Experiment.create(config, tmp_path / "run").run()
    outputs = {o["name"]: o for o in result.summary["outputs"]}
    for key in ACCURACIES:
        assert outputs[key]["covered"] is True, key
    assert outputs["accuracy.png"]["covered"] is True


def test_the_main_job_draws_its_test_sets_from_the_seed():
    """`privfl run` with no config: its accuracies are not marked outside the guarantee."""
    from privfl.algorithms.outputs import RELEASED_ACCURACY, test_set_classes
    from privfl.config import DEMO_CONFIG

    assert DEMO_CONFIG["data"]["client_test"] == "seed-labels"
    keys = ("personalised_accuracy", "global_accuracy")
    info = {"client_test": "seed-labels", "test_from_train_labels": False}
    classes = test_set_classes(dict.fromkeys(keys, RELEASED_ACCURACY), keys, info)
    assert all(classes[key][0] for key in keys)


def test_one_line_says_what_may_be_published():
    from privfl.algorithms.outputs import publishable_line

    rows = [{"name": "round", "kind": "metric", "covered": True},
            {"name": "personalised_accuracy", "kind": "metric", "covered": True},
            {"name": "global_accuracy", "kind": "metric", "covered": False},
            {"name": "train_loss", "kind": "metric", "covered": False},
            {"name": "run.json", "kind": "file", "covered": True},
            {"name": "model.pt", "kind": "file", "covered": True},
            {"name": "privacy.png", "kind": "file", "covered": True},
            {"name": "report.md", "kind": "file", "covered": False}]
    keys = ["personalised_accuracy", "global_accuracy"]
    assert publishable_line(rows, keys) == (
        "may be published with the guarantee: model.pt, privacy.png and the accuracies "
        "(personalised); 3 other outputs may not (privacy.json outputs say which and why)")
    none = [{**row, "covered": False} for row in rows]
    assert publishable_line(none, keys).startswith("publish nothing of this run")
    with pytest.raises(ValueError, match=r"outputs holds \{'name': 'x'\}"):
        publishable_line([{"name": "x"}], keys)
