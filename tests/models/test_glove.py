"""GloVe text files: vectors land on their token ids, missing words are counted and drawn at
the file's scale, and hostile files (ragged rows, NaN, wrong dimension, duplicate words,
huge lines, not UTF-8, nothing in the vocabulary) are refused naming the file and line."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from privfl.data.errors import DataFormatError
from privfl.models.glove import MAX_LINE_CHARS, check_vocabulary, read_glove

VOCAB = ("<pad>", "<unk>", "the", "cat", "zyzzyva", "sat")


def _write(tmp_path, lines, name="glove.txt", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes("\n".join(lines).encode(encoding) + b"\n")
    return path


def test_vectors_land_on_their_token_ids_and_missing_words_are_counted(tmp_path):
    path = _write(tmp_path, ["of 9 9 9", "the 0.5 -1 2", "sat 1e-3 4 -0.25", "cat 3 2 1",
                             "dog 7 7 7"])
    torch.manual_seed(0)
    glove = read_glove(path, VOCAB, 3)
    m = glove.matrix
    assert m.shape == (6, 3) and m.dtype == torch.float32
    assert torch.equal(m[0], torch.zeros(3))  # <pad>
    assert m[2].tolist() == [0.5, -1.0, 2.0]
    assert m[3].tolist() == [3.0, 2.0, 1.0]
    assert m[5].tolist() == pytest.approx([1e-3, 4.0, -0.25])
    assert (glove.found, glove.missing, glove.missing_examples) == (3, 1, ("zyzzyva",))
    assert glove.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert "3 of 4 vocabulary words found, 1 missing" in glove.summary()
    # <unk> and the missing word: N(0, s^2) with s the std of the vectors found, seeded
    found = np.array([[0.5, -1, 2], [3, 2, 1], [1e-3, 4, -0.25]], dtype=np.float32)
    torch.manual_seed(0)
    expected = torch.randn(2, 3) * float(found.std())
    assert torch.equal(m[[1, 4]], expected)


@pytest.mark.parametrize("lines, match", [
    (["the 1 2 3", "cat 1 2"], "line 2: 2 values after the word: the model's embedding_dim is 3"),
    (["the 1 2 3 4", "cat 1 2 3 4"], "line 1: 4 values .* embedding_dim is 3"),
    (["the 1 nan 3"], "line 1: word 'the' has a value that is not a finite"),
    (["the 1 2 3", "cat inf 2 3"], "line 2: word 'cat' has a value that is not a finite"),
    (["cat 1 2 1e39"], "not a finite float32"),
    (["the 1 2 3", "cat 1 x 3"], "line 2: a value of 'cat' is not a number"),
    (["the 1 2 3", "cat 1 2 3", "the 4 5 6"], "line 3: word 'the' appears again .*line 1"),
    (["new york 1 2 3"], "line 1: 4 values after the word"),
    (["dog 1 2 3", "fish 1 2 3"], "none of the vocabulary's 4 words is in the file"),
])
def test_hostile_files_are_refused_naming_the_line(tmp_path, lines, match):
    path = _write(tmp_path, lines)
    with pytest.raises(DataFormatError, match=match) as error:
        read_glove(path, VOCAB, 3)
    assert str(path) in str(error.value)


def test_a_huge_line_is_refused_without_reading_it_whole(tmp_path):
    path = tmp_path / "huge.txt"
    with path.open("w") as f:
        f.write("the 1 2 3\n")
        f.write("cat" + " 1" * (MAX_LINE_CHARS // 2 + 10) + "\n")
    with pytest.raises(DataFormatError, match=f"line 2: longer than {MAX_LINE_CHARS} bytes"):
        read_glove(path, VOCAB, 3)


def test_many_words_outside_the_vocabulary_are_streamed(tmp_path):
    path = tmp_path / "big.txt"
    rng = np.random.default_rng(0)
    with path.open("w") as f:
        for i in range(20000):
            f.write(f"w{i} " + " ".join(f"{v:.4f}" for v in rng.normal(size=3)) + "\n")
        f.write("cat 1 2 3\n")
    glove = read_glove(path, VOCAB, 3)
    assert glove.found == 1 and glove.matrix[3].tolist() == [1.0, 2.0, 3.0]


def test_bytes_that_are_not_utf8_are_refused(tmp_path):
    path = tmp_path / "latin.txt"
    path.write_bytes(b"the 1 2 3\ncaf\xe9 1 2 3\n")
    with pytest.raises(DataFormatError, match="line 2: not UTF-8"):
        read_glove(path, VOCAB, 3)


def test_arguments_are_validated(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such GloVe file"):
        read_glove(tmp_path / "absent.txt", VOCAB, 3)
    path = _write(tmp_path, ["the 1 2 3"])
    with pytest.raises(ValueError, match="dim = 0 is out of range"):
        read_glove(path, VOCAB, 0)
    with pytest.raises(ValueError, match="must start with '<pad>'"):
        check_vocabulary(("the", "<unk>", "cat"))
    with pytest.raises(ValueError, match="'cat' appears twice"):
        check_vocabulary(("<pad>", "<unk>", "cat", "cat"))
    with pytest.raises(ValueError, match="sequence of words"):
        check_vocabulary("<pad><unk>")
