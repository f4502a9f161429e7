"""Pixel-pattern triggers of backdoor attacks and their split among attackers (numpy only).

The backdoor of Bagdasaryan et al. 2020, as Xie et al. 2023 use it on MNIST and CIFAR-10: a
small triangle in the lower right corner, given as (row, column) pixels of a 28 x 28 (or
32 x 32) image, each set to 1.0 on every channel (:data:`PAPER_PATTERN`). The list printed in
the paper and in its code has 16 entries with (25, 26) twice, i.e. 15 distinct pixels;
:data:`CORRECTED_PATTERN` has (25, 27) in place of the repeat (16 distinct pixels), which was
probably intended.

A :class:`Trigger` holds distinct pixels (in listed order), the value written and the space the
value is in: ``raw`` (the pixel range of the stored images before standardisation, e.g. 1.0 =
white on MNIST, Xie et al.'s MNIST setting) or ``normalized`` (written after standardisation
with the dataset's mean/std, Xie et al.'s CIFAR-10 setting). :meth:`Trigger.stamp` converts the
value to the space the images are stored in, so the same trigger means the same thing whether
``data.normalize`` is on or off.

Distributed backdoor (DBA, Xie et al. 2020): the trigger is split into consecutive pieces, one
per attacker (:meth:`Trigger.pieces`); every piece has at least one pixel and the pieces'
union is the whole trigger. The released code of Xie et al. 2023 gives the last attacker
``pattern[i * size : -1]``, which drops the last pixel; privfl does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privfl._validation import check_choice, check_int, check_real

__all__ = [
    "ANCHORS",
    "CORRECTED_PATTERN",
    "PAPER_PATTERN",
    "PATTERNS",
    "SPACES",
    "Trigger",
    "pattern_pixels",
]

#: The trigger of Xie et al. 2023 (their code's ``poison_pattern``), as printed: 16 entries,
#: (25, 26) twice, so 15 distinct pixels.
PAPER_PATTERN: tuple[tuple[int, int], ...] = (
    (23, 26), (23, 27), (24, 26), (24, 27), (25, 25), (25, 26), (25, 26), (26, 24), (26, 25),
    (26, 26), (26, 27), (27, 23), (27, 24), (27, 25), (27, 26), (27, 27),
)
#: The same triangle with (25, 27) in place of the repeated (25, 26): 16 distinct pixels.
CORRECTED_PATTERN: tuple[tuple[int, int], ...] = (
    PAPER_PATTERN[:6] + ((25, 27),) + PAPER_PATTERN[7:]
)
#: Named patterns (``attack.trigger.pattern``); ``custom`` takes ``pixels``.
PATTERNS = ("paper", "paper-corrected", "custom")
#: Spaces the trigger value may be given in.
SPACES = ("raw", "normalized")
#: ``absolute``: pixels as given; ``bottom-right``: shifted so that the pattern's bounding box
#: ends at the image's last row and column (the same place for 28 x 28 images).
ANCHORS = ("absolute", "bottom-right")


def pattern_pixels(pattern: str, pixels: Sequence[Sequence[int]] | None = None) -> np.ndarray:
    """The distinct ``(row, col)`` pixels of a named pattern (or of ``pixels`` for ``custom``),
    in listed order, as an ``[P, 2]`` int64 array (repeats dropped)."""
    pattern = check_choice("pattern", pattern, PATTERNS)
    if pattern == "custom":
        if pixels is None:
            raise ValueError("pixels = None is not allowed with pattern = 'custom': give a "
                             "list of [row, col] pairs")
        listed = pixels
    else:
        if pixels is not None:
            raise ValueError(f"pixels is only allowed with pattern = 'custom' (pattern = "
                             f"{pattern!r} has its own pixels)")
        listed = PAPER_PATTERN if pattern == "paper" else CORRECTED_PATTERN
    rows = []
    for i, pair in enumerate(listed):
        if len(pair) != 2:
            raise ValueError(f"pixels[{i}] = {list(pair)!r} is not allowed: must be [row, col]")
        rows.append((check_int(f"pixels[{i}][0]", pair[0]), check_int(f"pixels[{i}][1]",
                                                                        pair[1])))
    if not rows:
        raise ValueError("pixels = [] is not allowed: a trigger needs at least one pixel")
    seen: dict[tuple[int, int], None] = dict.fromkeys(rows)  # ordered de-duplication
    return np.array(list(seen), dtype=np.int64).reshape(-1, 2)


@dataclass(frozen=True, eq=False)
class Trigger:
    """A pixel pattern, the value written into it and that value's space.

    Parameters
    ----------
    pixels
        ``[P, 2]`` distinct (row, col) pairs (``P >= 1``), in the pattern's order.
    value
        The value every channel of every pixel is set to (1.0: white in raw ``[0, 1]`` pixels).
    space
        ``"raw"`` or ``"normalized"`` (see the module docstring).
    anchor
        ``"absolute"`` or ``"bottom-right"`` (see :data:`ANCHORS`).
    frame
        ``(last row, last column)`` of the pattern that ``bottom-right`` aligns with the image's
        corner: by default this trigger's own; a DBA piece keeps its whole trigger's, so the
        pieces land where the whole trigger does.
    """

    pixels: np.ndarray
    value: float = 1.0
    space: str = "raw"
    anchor: str = "absolute"
    frame: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        pixels = np.asarray(self.pixels)
        if pixels.ndim != 2 or pixels.shape[1] != 2 or pixels.shape[0] < 1:
            raise ValueError(f"pixels has shape {pixels.shape}: must be [P, 2] with P >= 1")
        if not np.issubdtype(pixels.dtype, np.integer) or pixels.min() < 0:
            raise ValueError("pixels must be non-negative integer (row, col) pairs")
        if np.unique(pixels, axis=0).shape[0] != pixels.shape[0]:
            raise ValueError("pixels holds a repeated (row, col): pixels must be distinct")
        object.__setattr__(self, "pixels", pixels.astype(np.int64))
        object.__setattr__(self, "value", check_real("value", self.value))
        object.__setattr__(self, "space", check_choice("space", self.space, SPACES))
        object.__setattr__(self, "anchor", check_choice("anchor", self.anchor, ANCHORS))
        frame = self.frame if self.frame is not None else tuple(self.pixels.max(axis=0))
        object.__setattr__(self, "frame", (check_int("frame[0]", frame[0]),
                                           check_int("frame[1]", frame[1])))

    @classmethod
    def from_pattern(cls, pattern: str = "paper", pixels: Sequence[Sequence[int]] | None = None,
                     *, value: float = 1.0, space: str = "raw",
                     anchor: str = "absolute") -> Trigger:
        """The trigger of a named pattern (:data:`PATTERNS`)."""
        return cls(pattern_pixels(pattern, pixels), value, space, anchor)

    def __len__(self) -> int:
        return int(self.pixels.shape[0])

    def __repr__(self) -> str:
        return (f"Trigger({len(self)} pixels, value={self.value:g} ({self.space}), "
                f"anchor={self.anchor!r})")

    # ------------------------------------------------------------------ placement
    def placed(self, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, cols)`` of the pixels in an image of ``height x width`` (after the anchor);
        ValueError if the pattern does not fit."""
        height, width = check_int("height", height, 1), check_int("width", width, 1)
        rows, cols = self.pixels[:, 0].copy(), self.pixels[:, 1].copy()
        if self.anchor == "bottom-right":
            rows += height - 1 - self.frame[0]
            cols += width - 1 - self.frame[1]
        if rows.min() < 0 or cols.min() < 0 or rows.max() >= height or cols.max() >= width:
            span = (f"rows {self.pixels[:, 0].min()}..{self.pixels[:, 0].max()}, columns "
                    f"{self.pixels[:, 1].min()}..{self.pixels[:, 1].max()}")
            raise ValueError(f"trigger ({span}, anchor {self.anchor!r}) does not fit images of "
                             f"{height} x {width}: use anchor 'bottom-right' or smaller pixels")
        return rows, cols

    def channel_values(self, mean: Sequence[float], std: Sequence[float],
                       normalized: bool) -> np.ndarray:
        """The value to write on each channel of images stored ``normalized`` (or raw) with
        per-channel ``mean``/``std``: ``raw`` values are standardised as ``(v - mean) / std``
        for normalised images; ``normalized`` values are un-standardised as ``v std + mean``
        for raw images."""
        mean = np.asarray(mean, dtype=np.float64)
        std = np.asarray(std, dtype=np.float64)
        raw = np.full(mean.shape, self.value) if self.space == "raw" else self.value * std + mean
        return (raw - mean) / std if normalized else raw

    def stamp(self, x: np.ndarray, mean: Sequence[float] = (0.0,), std: Sequence[float] = (1.0,),
              normalized: bool = False) -> np.ndarray:
        """A copy of images ``x`` (``N x C x H x W``) with the trigger written on every channel
        (:meth:`channel_values` for the images' normalisation)."""
        x = np.array(x, dtype=np.float32, copy=True)
        if x.ndim != 4:
            raise ValueError(f"x.shape = {x.shape} is out of range: a pixel trigger needs "
                             "images N x C x H x W (N x D tabular data cannot take one)")
        values = self.channel_values(mean, std, normalized)
        if values.size == 1:
            values = np.repeat(values, x.shape[1])
        if values.size != x.shape[1]:
            raise ValueError(f"mean/std have {values.size} channels: the images have "
                             f"{x.shape[1]}")
        rows, cols = self.placed(x.shape[2], x.shape[3])
        x[:, :, rows, cols] = values.astype(np.float32)[None, :, None]
        return x

    def mask(self, height: int, width: int) -> np.ndarray:
        """``height x width`` boolean mask of the trigger's pixels (after the anchor)."""
        rows, cols = self.placed(height, width)
        out = np.zeros((height, width), dtype=bool)
        out[rows, cols] = True
        return out

    # ------------------------------------------------------------------ DBA
    def pieces(self, count: int) -> list[Trigger]:
        """The trigger split into ``count`` consecutive pieces of sizes differing by at most one
        (the first ``P mod count`` pieces one pixel larger); their union is this trigger
        (distributed backdoor, Xie et al. 2020). ``1 <= count <= P``."""
        count = check_int("count", count, 1, len(self))
        return [Trigger(part, self.value, self.space, self.anchor, self.frame)
                for part in np.array_split(self.pixels, count)]
