"""LEAF natural-user federations (privfl.data.natural) on small splits in LEAF's JSON layout."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _leaf_files import (
    femnist_users,
    leaf_file,
    sent140_users,
    shakespeare_users,
    write_split,
    write_words,
)

from privfl.data.errors import DataFormatError, DatasetNotFoundError
from privfl.data.natural import load_leaf_natural
from privfl.data.text import SHAKESPEARE_CHARACTERS


def _femnist(root, train_users=("w0", "w1", "w2"), sizes=(3, 5, 2)):
    train = femnist_users(list(train_users), list(sizes), seed=1)
    test = femnist_users(["w0", "w2", "only-test"], [2, 1, 4], seed=2)
    # two train files, as LEAF writes them
    write_split(root, "femnist", [leaf_file(dict(list(train.items())[:2])),
                                  leaf_file(dict(list(train.items())[2:]))], [leaf_file(test)])
    return train, test


def test_femnist_one_client_per_user_with_its_own_records(tmp_path):
    train, test = _femnist(tmp_path)
    data = load_leaf_natural("femnist", tmp_path)
    assert data.client_ids == ["w0", "w1", "w2"]
    assert data.client_sizes.tolist() == [3, 5, 2]
    assert data.test_sizes.tolist() == [2, 0, 1]  # w1 has no test records
    assert data.info["test_only_groups"] == ["only-test"]
    assert data.input_shape == (1, 28, 28) and data.num_classes == 62
    for user in ("w0", "w1", "w2"):
        x, y = data.client_train(user)
        np.testing.assert_array_equal(x.reshape(len(y), 784),
                                      np.asarray(train[user][0], dtype=np.float32))
        np.testing.assert_array_equal(y, train[user][1])
    x, y = data.client_test("w2")
    np.testing.assert_array_equal(y, test["w2"][1])
    assert data.is_disjoint()


def test_users_keeps_the_first_users_in_file_order(tmp_path):
    _femnist(tmp_path)
    data = load_leaf_natural("femnist", tmp_path, users=2)
    assert data.client_ids == ["w0", "w1"]
    assert data.info["test_only_groups"] == ["w2", "only-test"]


def test_shakespeare_characters_and_next_character_targets(tmp_path):
    users = {"KING": (["To be, or not", "x" * 100], ["t", "@"]),
             "FOOL": (["é~"], ["é"])}  # é and ~ are not in LEAF's alphabet
    write_split(tmp_path, "shakespeare", [leaf_file(users)], [leaf_file({"KING": (["a"], ["b"])})])
    data = load_leaf_natural("shakespeare", tmp_path)
    vocab = data.train.vocabulary
    assert vocab[:2] == ("<pad>", "<unk>") and "".join(vocab[2:]) == SHAKESPEARE_CHARACTERS
    assert len(vocab) == 82 == data.num_classes
    assert data.train.x.dtype == np.int64 and data.train.x.shape == (3, 80)
    x, y = data.client_train("KING")
    expected = [vocab.index(c) for c in "To be, or not"]
    assert x[0, :13].tolist() == expected and not x[0, 13:].any()  # right-padded with 0
    assert x[1].tolist() == [vocab.index("x")] * 80  # the last 80 characters
    assert y.tolist() == [vocab.index("t"), 1]  # "@" is not in LEAF's alphabet: <unk>
    x, y = data.client_train("FOOL")
    assert x[0, :2].tolist() == [1, 1] and y.tolist() == [1]
    assert data.info["vocabulary_public"] is True
    assert "LEAF's Shakespeare alphabet" in data.info["vocabulary"]


def test_sent140_words_from_a_glove_file(tmp_path):
    users = {"alice": ([["1", "d", "NO_QUERY", "alice", "I LOVE it!! zzz"]], [1]),
             "bob": (["bad day"], [0])}  # text alone is accepted too
    write_split(tmp_path, "sent140", [leaf_file(users)], [leaf_file(users)])
    glove = write_words(tmp_path / "glove.txt", ["i", "love", "it", "!", "bad", "day"], 3)
    data = load_leaf_natural("sent140", tmp_path, vocabulary=str(glove), seq_len=6)
    assert data.train.vocabulary == ("<pad>", "<unk>", "i", "love", "it", "!", "bad", "day")
    x, y = data.client_train("alice")
    assert x.tolist() == [[2, 3, 4, 5, 5, 1]] and y.tolist() == [1]  # zzz: <unk>
    x, y = data.client_train("bob")
    assert x.tolist() == [[6, 7, 0, 0, 0, 0]] and y.tolist() == [0]
    assert data.num_classes == 2 and data.info["vocabulary_public"] is True
    short = load_leaf_natural("sent140", tmp_path, vocabulary=str(glove), vocabulary_size=2,
                              seq_len=3)
    assert short.train.vocabulary == ("<pad>", "<unk>", "i", "love")
    assert short.client_train("alice")[0].tolist() == [[2, 3, 1]]


def test_sent140_needs_a_vocabulary_and_a_split_built_one_says_it_leaks(tmp_path):
    users = sent140_users(["a", "b"], [4, 3])
    write_split(tmp_path, "sent140", [leaf_file(users)], [leaf_file(users)])
    with pytest.raises(DatasetNotFoundError, match="sent140 needs a vocabulary: set "
                       "data.vocabulary"):
        load_leaf_natural("sent140", tmp_path)
    data = load_leaf_natural("sent140", tmp_path, vocabulary="training-split")
    assert data.info["vocabulary_public"] is False
    assert "does NOT cover it" in data.info["vocabulary"]
    counts = {}
    for x, _ in users.values():
        for record in x:
            for word in record[4].split():
                counts[word] = counts.get(word, 0) + 1
    most = sorted(counts, key=lambda w: (-counts[w], w))
    assert data.train.vocabulary[2:] == tuple(most)  # by decreasing count, ties by word


def test_a_missing_split_is_a_one_line_error_that_says_where_to_get_it(tmp_path):
    for name in ("femnist", "shakespeare", "sent140"):
        with pytest.raises(DatasetNotFoundError) as error:
            load_leaf_natural(name, tmp_path)
        message = str(error.value)
        assert "\n" not in message
        assert str(tmp_path / name) in message and "preprocess.sh" in message


@pytest.mark.parametrize("content, match", [
    ('{"users": ["a"], "num_samples": [1], "user_data": {"a": {"x": [[0', "not valid LEAF JSON"),
    ({"users": ["a"], "num_samples": [10**9], "user_data": {"a": {"x": [[0.0] * 784],
                                                                  "y": [1]}}},
     "num_samples 1000000000 but 1 x"),
    ({"users": ["a"], "num_samples": [1], "user_data": {"a": {"x": [[float("nan")] * 784],
                                                              "y": [1]}}},
     "NaN or infinite pixel values"),
    ({"users": ["a"], "num_samples": [1], "user_data": {"a": {"x": [[0.0] * 783], "y": [1]}}},
     r"shape \(1, 783\)"),
    ({"users": ["a"], "num_samples": [1], "user_data": {"a": {"x": [[0.0] * 784], "y": [62]}}},
     r"must be integer classes in \[0, 61\]"),
    ({"users": ["a"], "num_samples": [1], "user_data": {"a": {"x": [["p"] * 784], "y": [1]}}},
     "FEMNIST x must be lists of 784 numbers"),
    ({"users": ["a", "a"], "num_samples": [1, 1], "user_data": {}}, "duplicate ids"),
])
def test_hostile_femnist_files_are_refused_naming_the_file(tmp_path, content, match):
    folder = tmp_path / "femnist" / "data"
    for split in ("train", "test"):
        (folder / split).mkdir(parents=True)
        path = folder / split / "bad.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(DataFormatError, match=match) as error:
        load_leaf_natural("femnist", tmp_path)
    assert "bad.json" in str(error.value)


def test_a_user_in_two_files_of_a_split_is_refused(tmp_path):
    users = femnist_users(["w0"], [2])
    write_split(tmp_path, "femnist", [leaf_file(users), leaf_file(users)], [leaf_file(users)])
    with pytest.raises(DataFormatError, match="also appears in an earlier file"):
        load_leaf_natural("femnist", tmp_path)


@pytest.mark.parametrize("name, users, match", [
    ("sent140", {"a": (["fine"], [4])}, r"must be integer classes in \[0, 1\]"),
    ("sent140", {"a": (["fine"], [True])}, r"must be integer classes in \[0, 1\]"),
    ("sent140", {"a": ([["1", "d", "q", "a", 7]], [1])}, "Sent140 x entries must be"),
    ("shakespeare", {"a": (["abc"], ["de"])}, "y single characters"),
    ("shakespeare", {"a": ([3], ["d"])}, "Shakespeare x must be strings"),
])
def test_hostile_text_records_are_refused(tmp_path, name, users, match):
    write_split(tmp_path, name, [leaf_file(users)], [leaf_file(users)])
    glove = write_words(tmp_path / "words.txt", ["fine"])
    with pytest.raises(DataFormatError, match=match):
        load_leaf_natural(name, tmp_path, vocabulary=str(glove))


def test_femnist_refuses_text_settings(tmp_path):
    _femnist(tmp_path)
    with pytest.raises(ValueError, match="vocabulary and seq_len are not allowed for femnist"):
        load_leaf_natural("femnist", tmp_path, seq_len=10)


def test_shakespeare_users_of_every_size_encode_their_own_text(tmp_path):
    users = shakespeare_users(["A", "B", "C"], [1, 7, 3], seed=4)
    write_split(tmp_path, "shakespeare", [leaf_file(users)], [leaf_file(users)])
    data = load_leaf_natural("shakespeare", tmp_path)
    vocab = data.train.vocabulary
    for user, (x, y) in users.items():
        got_x, got_y = data.client_train(user)
        decoded = ["".join(vocab[i] for i in row) for row in got_x]
        assert decoded == x and [vocab[i] for i in got_y] == y


@pytest.mark.parametrize("damage, match", [
    (lambda b: b[:-5], "truncated|expected|size"),
    (lambda b: b"\x00\x00\x08\x04" + b[4:], "magic|type|dimensions"),
    (lambda b: b[:4] + (2**31 - 1).to_bytes(4, "big") + b[8:], "truncated|expected|size|declares"),
])
def test_hostile_emnist_idx_files_are_refused_through_the_config(tmp_path, damage, match):
    from privfl.algorithms.builders import build_dataset
    from privfl.config import config_from_dict
    from privfl.data import write_idx

    rng = np.random.default_rng(0)
    folder = tmp_path / "emnist"
    folder.mkdir()
    for part in ("train", "test"):
        stem = folder / f"emnist-byclass-{part}"
        write_idx(f"{stem}-images-idx3-ubyte", rng.integers(0, 256, (8, 28, 28), np.uint8))
        write_idx(f"{stem}-labels-idx1-ubyte", np.arange(8, dtype=np.uint8))
    images = folder / "emnist-byclass-train-images-idx3-ubyte"
    images.write_bytes(damage(images.read_bytes()))
    config = config_from_dict({"data": {"dataset": "emnist", "root": str(tmp_path),
                                        "partition": "iid", "clients": 2, "train_size": 4}})
    with pytest.raises(DataFormatError, match=match) as error:
        build_dataset(config)
    assert "emnist-byclass-train-images" in str(error.value) and "\n" not in str(error.value)


def test_list_datasets_names_the_natural_datasets_and_where_to_get_them():
    from typer.testing import CliRunner

    from privfl.cli.main import app

    result = CliRunner().invoke(app, ["list", "datasets"])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.strip()}
    for name in ("femnist", "shakespeare", "sent140"):
        assert f"data.root/{name}/data/{{train,test}}" in lines[name]
        assert "preprocess.sh" in lines[name]
    assert "data.root/emnist" in lines["emnist"] and "byclass" in lines["emnist"]
    assert "pip install 'privfl[flwr-datasets]'" in lines["flwr-datasets"]


def test_read_leaf_json_converts_x_while_parsing(tmp_path):
    from privfl.data import read_leaf_json

    users = {"a": ([[1, 2], [3, 4]], [0, 1]), "x": ([[5, 6]], [1])}  # a user named x
    path = tmp_path / "one.json"
    path.write_text(json.dumps(leaf_file(users)))
    leaf = read_leaf_json(path, convert_x=lambda x: np.asarray(x, dtype=np.float32))
    assert isinstance(leaf.x["a"], np.ndarray) and leaf.x["a"].tolist() == [[1, 2], [3, 4]]
    assert leaf.x["x"].tolist() == [[5, 6]] and leaf.y["a"] == [0, 1]
    assert read_leaf_json(path).x["a"] == [[1, 2], [3, 4]]  # lists without convert_x
