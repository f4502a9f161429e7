"""docs/reproductions.md against a fresh generation (shared by the tests of tests/reproduce).

The page is generated (``python -m privfl.reproduce.document docs/reproductions.md
--paper-plan``); these helpers read its tables back so a test fails when the committed page
differs from what privfl computes now. What is compared is what is deterministic: every cell of
an accounting row, numbers to their printed precision (:func:`same_text`), and a training row's
quantity, source, basis and paper value, with privfl's value within the quick runs' spread
(training floats differ across CPUs in the last bits, and a few training steps amplify that).
Dates, wall times, the machine and the notes are not compared.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reproductions.md"
NUMBER = re.compile(r"[-+]?(?:\d+(?:,\d{3})*\.?\d*|\.\d+)(?:e[-+]?\d+)?")
#: the columns of a table row (privfl.reproduce.rows.HEADER)
COLUMNS = ("quantity", "source", "basis", "paper", "privfl", "rel. diff", "tolerance", "verdict",
           "reason")


def table_rows(text: str, heading: str) -> list[tuple[str, ...]]:
    """The rows of the table under ``heading`` (a whole line, e.g. ``## <title>``) in a
    Markdown text, each as its cells; the header row and the rule are left out."""
    lines = text.splitlines()
    assert heading in lines, f"{heading!r} is not a heading of the page"
    rows, started = [], False
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("|"):
            started = True
            if not line.startswith("|---"):  # the rule under the header
                rows.append(tuple(cell.strip() for cell in line[2:-2].split(" | ")))
        elif started or line.startswith("#"):
            break
    assert rows and rows[0] == COLUMNS, rows[:1]
    return rows[1:]


def _numbers(text: str) -> tuple[list[str], list[str]]:
    return NUMBER.split(text), NUMBER.findall(text)


def _unit(text: str) -> float:
    """One unit of the last digit printed in ``text`` (``"2.71"`` -> 0.01, ``"1,000"`` -> 1)."""
    exponent = Decimal(text.replace(",", "")).as_tuple().exponent
    assert isinstance(exponent, int)
    return float(Decimal(1).scaleb(exponent))


def same_text(committed: str, fresh: str, *, absolute: float = 0.0) -> bool:
    """Whether two cells say the same: the same words, and each number within one unit of its
    last printed digit (a value on a rounding edge may print either way on another CPU) or
    within ``absolute``."""
    words_a, numbers_a = _numbers(committed)
    words_b, numbers_b = _numbers(fresh)
    if words_a != words_b or len(numbers_a) != len(numbers_b):
        return False
    for a, b in zip(numbers_a, numbers_b, strict=True):
        x, y = float(a.replace(",", "")), float(b.replace(",", ""))
        if abs(x - y) > max(_unit(a), _unit(b), absolute) * (1 + 1e-9):
            return False
    return True


#: a relative difference (in %) below this is rounding noise (a formula evaluated twice): its
#: sign and digits vary with the CPU
NOISE_PERCENT = 1e-6


def differing_cells(committed: tuple[str, ...], fresh: tuple[str, ...], *,
                    columns: tuple[str, ...] = COLUMNS,
                    absolute: float = 0.0) -> list[tuple[str, str, str]]:
    """(column, committed, fresh) for each of ``columns`` where the two rows differ; privfl's
    value may move by ``absolute``, a relative difference by :data:`NOISE_PERCENT`."""
    slack = {"privfl": absolute, "rel. diff": NOISE_PERCENT}
    found = []
    for name in columns:
        a, b = committed[COLUMNS.index(name)], fresh[COLUMNS.index(name)]
        if not same_text(a, b, absolute=slack.get(name, 0.0)):
            found.append((name, a, b))
    return found


def summary_row(text: str, name: str) -> dict[str, str]:
    """The page's summary line of paper ``name`` (its ``privfl reproduce NAME`` command), by
    column."""
    header, *rows = [line for line in text.splitlines() if line.startswith("| paper | command")
                     or f"`privfl reproduce {name} --scale quick`" in line and
                     line.startswith("| ")]
    assert len(rows) == 1, rows
    split = [cell.strip() for cell in header[2:-2].split(" | ")]
    return dict(zip(split, [cell.strip() for cell in rows[0][2:-2].split(" | ")], strict=True))
