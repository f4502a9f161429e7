"""Tokenisation (privfl.data.text): vocabularies, encoding, and the card's vocabulary row."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.data import Dataset
from privfl.data.errors import DataFormatError, DatasetNotFoundError
from privfl.data.text import (
    SHAKESPEARE_CHARACTERS,
    Vocabulary,
    character_vocabulary,
    encode,
    read_vocabulary,
    split_vocabulary,
    vocabulary_card_rows,
    words,
)

VOCAB = character_vocabulary()
TOKENS = st.lists(st.sampled_from([*SHAKESPEARE_CHARACTERS, "é", "@"]), max_size=30)


@settings(max_examples=60, deadline=None)
@given(st.lists(TOKENS, max_size=6), st.integers(1, 12), st.sampled_from(["first", "last"]))
def test_encode_keeps_the_chosen_tokens_and_pads_with_zero(lines, seq_len, keep):
    ids = encode(lines, VOCAB, seq_len, keep=keep)
    assert ids.dtype == np.int64 and ids.shape == (len(lines), seq_len)
    for row, tokens in zip(ids, lines, strict=True):
        kept = tokens[:seq_len] if keep == "first" else tokens[-seq_len:]
        decoded = [VOCAB.tokens[i] for i in row[:len(kept)]]
        assert decoded == [t if t in SHAKESPEARE_CHARACTERS else "<unk>" for t in kept]
        assert not row[len(kept):].any()


def test_leaf_words_and_their_golden_ids():
    assert words("I can't believe it... GREAT day!!") == [
        "i", "can't", "believe", "it", ".", ".", ".", "great", "day", "!", "!"]
    vocab = Vocabulary(("<pad>", "<unk>", "great", "day", "!"), "a test", public=True)
    assert encode([words("Great day!! ok")], vocab, 6).tolist() == [[2, 3, 4, 4, 1, 0]]
    assert len(VOCAB) == 82 and VOCAB.id("\n") == 2 and VOCAB.id("}") == 81


def test_read_vocabulary_from_word_lists_and_glove_files(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("the 0.1 0.2\n, 0.3 0.4\n<unk> 0 0\nthe 1 1\n\nof 0.5 0.6\n")
    vocab = read_vocabulary(glove)
    assert vocab.tokens == ("<pad>", "<unk>", "the", ",", "of") and vocab.public
    assert read_vocabulary(glove, limit=1).tokens == ("<pad>", "<unk>", "the")
    assert "public: the guarantee covers" in vocab.describe()


@pytest.mark.parametrize("content, error, match", [
    (b"", DataFormatError, "holds no words"),
    (b"\xff\xfe\x00bad", DataFormatError, "not UTF-8 text"),
    (b"w" * 70_000, DataFormatError, "line 1 is longer than 65536 characters"),
])
def test_hostile_vocabulary_files(tmp_path, content, error, match):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content)
    with pytest.raises(error, match=match):
        read_vocabulary(path)
    with pytest.raises(DatasetNotFoundError, match="no such file"):
        read_vocabulary(tmp_path / "absent.txt")


def test_split_vocabulary_is_not_public_and_the_card_says_so():
    vocab = split_vocabulary([["b", "a", "b"], ["c", "<pad>"]], limit=2)
    assert vocab.tokens == ("<pad>", "<unk>", "b", "a") and not vocab.public
    row = vocabulary_card_rows({"vocabulary": vocab.describe()})["vocabulary"]
    assert "does NOT cover it" in row and "the training split" in row
    assert vocabulary_card_rows({}) == {}
    with pytest.raises(ValueError, match="holds no tokens"):
        split_vocabulary([[], ["<unk>"]])


@pytest.mark.parametrize("tokens, match", [
    (("<unk>", "<pad>", "a"), "must start with '<pad>', '<unk>'"),
    (("<pad>", "<unk>"), "at least one more token"),
    (("<pad>", "<unk>", "a", "a"), "duplicate tokens"),
])
def test_vocabulary_refuses_bad_token_lists(tokens, match):
    with pytest.raises(ValueError, match=match):
        Vocabulary(tokens, "a test", public=True)


def test_text_dataset_keeps_int64_ids_in_the_vocabulary():
    vocab = ("<pad>", "<unk>", "a")
    data = Dataset(np.array([[2, 1, 0]]), [1], "t/train", 2, vocabulary=vocab)
    assert data.x.dtype == np.int64 and data.normalize() is data
    assert data.subset([0, 0]).vocabulary == vocab
    with pytest.raises(ValueError, match=r"token ids in \[0, 3\] is out of range"):
        Dataset(np.array([[3, 0, 0]]), [1], "t", 2, vocabulary=vocab)
    with pytest.raises(ValueError, match="must be N x seq_len integer token ids"):
        Dataset(np.array([[0.5, 0.0]]), [1], "t", 2, vocabulary=vocab)
