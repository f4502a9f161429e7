"""The noise setting of ``privfl account|calibrate|audit``: one name, ``--noise-multiplier``.

The noise multiplier z is the standard deviation of the Gaussian noise on the *sum* of the
clipped contributions divided by the clipping norm C (Opacus / TF Privacy). A command of one
paper also takes that paper's own parameter as ``--paper-sigma`` (its help states the
conversion); the user gives exactly one of the two. The option names of earlier versions
(``--sigma``, ``--noise``) still work, hidden, with a one-line deprecation notice on stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import typer

from privfl._validation import check_positive

T = TypeVar("T", float, str)

MULTIPLIER_OPTION = "--noise-multiplier"
PAPER_OPTION = "--paper-sigma"


@dataclass(frozen=True)
class NoiseChoice:
    """What the user gave: ``which`` is ``"multiplier"`` or ``"paper"``; ``value`` is its value
    (a number, or the text of a comma list where the command takes one per round)."""

    which: str
    value: float | str

    @property
    def option(self) -> str:
        return MULTIPLIER_OPTION if self.which == "multiplier" else PAPER_OPTION

    def convert(self, value: float, to_multiplier: Callable[[float], float],
                to_paper: Callable[[float], float]) -> tuple[float, float]:
        """``(noise multiplier, paper sigma)`` of one ``value`` of this option (checked > 0 and
        finite, the message naming the option)."""
        value = check_positive(self.option, value)
        if self.which == "multiplier":
            return value, to_paper(value)
        return to_multiplier(value), value


def deprecated_option(old: str, value: T | None, new: str = PAPER_OPTION) -> T | None:
    """``value`` of an option renamed to ``new``; when given, a one-line notice on stderr."""
    if value is not None:
        typer.echo(f"privfl: warning: {old} is deprecated: it is {new} (the same number)",
                   err=True)
    return value


def one_noise(multiplier: T | None, paper: T | None, *, paper_meaning: str,
              deprecated: tuple[str, T | None] | None = None) -> NoiseChoice:
    """The one noise setting given: ``--noise-multiplier`` or ``--paper-sigma``.

    ``deprecated`` is ``(old option name, value)`` of a hidden option that means
    ``--paper-sigma``. Raises ``ValueError`` naming the options when none or both are given;
    ``paper_meaning`` says what the paper's sigma is in the message.
    """
    if deprecated is not None and deprecated[1] is not None:
        old, value = deprecated
        if paper is not None:
            raise ValueError(f"{old} = {value!r} and {PAPER_OPTION} = {paper!r}: {old} is the "
                             f"deprecated name of {PAPER_OPTION}; give it once")
        paper = deprecated_option(old, value)
    if multiplier is None and paper is None:
        raise ValueError(f"the noise is missing: give {MULTIPLIER_OPTION} (noise std / clip norm "
                         f"on the sum) or {PAPER_OPTION} ({paper_meaning})")
    if multiplier is not None and paper is not None:
        raise ValueError(f"{MULTIPLIER_OPTION} = {multiplier!r} and {PAPER_OPTION} = {paper!r}: "
                         f"both given; give exactly one ({PAPER_OPTION} is {paper_meaning})")
    if multiplier is not None:
        return NoiseChoice("multiplier", multiplier)
    return NoiseChoice("paper", paper)
