"""Pixel triggers of Xie et al. 2023 (as printed, corrected) and their DBA split (numpy only)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.attacks.triggers import (
    CORRECTED_PATTERN,
    PAPER_PATTERN,
    Trigger,
    pattern_pixels,
)

#: The pattern exactly as Xie et al. 2023's code lists it (16 entries, (25, 26) twice).
PRINTED = [(23, 26), (23, 27), (24, 26), (24, 27), (25, 25), (25, 26), (25, 26), (26, 24),
           (26, 25), (26, 26), (26, 27), (27, 23), (27, 24), (27, 25), (27, 26), (27, 27)]


def test_paper_pattern_is_the_printed_list_with_15_distinct_pixels():
    assert list(PAPER_PATTERN) == PRINTED
    pixels = pattern_pixels("paper")
    assert pixels.shape == (15, 2)
    assert [tuple(p) for p in pixels] == list(dict.fromkeys(PRINTED))
    corrected = pattern_pixels("paper-corrected")
    assert corrected.shape == (16, 2)
    assert set(map(tuple, corrected)) == set(PRINTED) | {(25, 27)}
    assert len(CORRECTED_PATTERN) == 16


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32)])
def test_stamp_sets_exactly_the_listed_pixels_to_one_on_every_channel(shape):
    x = np.random.default_rng(0).uniform(0.0, 0.9, size=(4, *shape)).astype(np.float32)
    stamped = Trigger.from_pattern("paper").stamp(x, (0.0,) * shape[0], (1.0,) * shape[0])
    changed = stamped != x
    expected = np.zeros(shape[1:], dtype=bool)
    for r, c in PRINTED:
        expected[r, c] = True
    assert expected.sum() == 15
    assert np.array_equal(changed.any(axis=(0, 1)), expected)  # no other pixel moved
    assert np.all(stamped[:, :, expected] == 1.0)  # absolute coordinates, on 32 x 32 too
    assert np.array_equal(stamped[:, :, ~expected], x[:, :, ~expected])
    assert x.max() < 1.0  # the input is untouched (a copy was stamped)


def test_raw_value_is_standardised_for_normalised_images_and_vice_versa():
    mean, std = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)
    x = np.zeros((1, 3, 32, 32), dtype=np.float32)
    raw = Trigger.from_pattern("paper")  # 1.0 white, in raw pixels
    values = raw.stamp(x, mean, std, normalized=True)[0, :, 23, 26]
    assert np.allclose(values, (1.0 - np.array(mean)) / np.array(std), rtol=1e-6)
    # Xie et al.'s CIFAR-10 trigger: 1.0 written after normalisation
    normed = Trigger.from_pattern("paper", space="normalized")
    assert np.allclose(normed.stamp(x, mean, std, normalized=True)[0, :, 23, 26], 1.0)
    raw_equivalent = normed.stamp(x, mean, std, normalized=False)[0, :, 23, 26]
    assert np.allclose(raw_equivalent, 1.0 * np.array(std) + np.array(mean), rtol=1e-6)


def test_bottom_right_anchor_moves_the_triangle_into_small_images():
    small = Trigger.from_pattern("paper", anchor="bottom-right").mask(8, 8)
    big = Trigger.from_pattern("paper").mask(28, 28)
    assert np.array_equal(small, big[20:, 20:])  # the same triangle, in the 8 x 8 corner
    assert np.array_equal(Trigger.from_pattern("paper", anchor="bottom-right").mask(28, 28), big)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 16), st.booleans(), st.sampled_from(["absolute", "bottom-right"]))
def test_dba_pieces_are_disjoint_nonempty_and_their_union_is_the_trigger(count, corrected,
                                                                         anchor):
    trigger = Trigger.from_pattern("paper-corrected" if corrected else "paper", anchor=anchor)
    if count > len(trigger):
        with pytest.raises(ValueError, match="count = 16 is out of range"):
            trigger.pieces(count)
        return
    pieces = trigger.pieces(count)
    sizes = [len(p) for p in pieces]
    assert len(pieces) == count and min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    masks = [p.mask(28, 28) for p in pieces]
    assert np.array_equal(np.logical_or.reduce(masks), trigger.mask(28, 28))
    assert sum(m.sum() for m in masks) == len(trigger)  # disjoint
    assert np.array_equal(np.concatenate([p.pixels for p in pieces]), trigger.pixels)  # in order
    if anchor == "bottom-right":  # a piece lands where its part of the whole trigger does
        small = [p.mask(10, 10) for p in pieces]
        assert np.array_equal(np.logical_or.reduce(small), trigger.mask(10, 10))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Trigger.from_pattern("paper").mask(8, 8), "does not fit images of 8 x 8"),
        (lambda: Trigger.from_pattern("paper").pieces(0), "count = 0 is out of range"),
        (lambda: pattern_pixels("custom"), "pixels = None is not allowed"),
        (lambda: pattern_pixels("paper", [[0, 0]]), "pixels is only allowed"),
        (lambda: pattern_pixels("custom", [[0, -1]]), "pixels[0][1] = -1 is out of range"),
        (lambda: pattern_pixels("custom", []), "pixels = [] is not allowed"),
        (lambda: pattern_pixels("star"), "pattern = 'star' is not allowed"),
        (lambda: Trigger(np.array([[1, 1], [1, 1]])), "repeated"),
        (lambda: Trigger.from_pattern("paper", value=float("nan")), "value = nan"),
        (lambda: Trigger.from_pattern("paper", space="pixels"), "space = 'pixels'"),
    ],
)
def test_bad_inputs_fail_with_one_line(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert message in str(error.value) and "\n" not in str(error.value)
