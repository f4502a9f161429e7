"""How a number computed now is compared with its golden (pinned) value.

Why not ``==``: numpy picks its exp/log/power kernels by the CPU at import time (AVX2 on one
machine, AVX-512 on another; ``numpy.show_runtime()`` lists them). The kernels differ in the last
unit of a few results, and a PLD composition or a root solve carries that to about 1e-12 relative
(the goldens pinned on an AVX2 machine, recomputed on an AVX-512 one: at most 2.1e-12; with
``NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL"`` they agree bit for bit again). So a golden float
matches when it is within ``REL`` relative (``ABS`` near zero) of the pinned one (the PLD's
numerical diagnostics and differences of epsilons: see ``DIAGNOSTIC_KEYS``, ``DIFFERENCE_KEYS``);
everything else (labels, units, scopes, methods, ints, keys, list lengths, NaN and infinities)
must be equal.
Comparisons of two numbers computed on the same machine stay exact (``==``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: relative tolerance of a golden float: 500 times the largest cross-CPU difference seen
REL = 1e-9
#: absolute tolerance below which a float counts as zero (error bounds of order 1e-17 and less)
ABS = 1e-300
#: keys whose value is a difference of two epsilons (calibrate's ``target - spent``): its error is
#: the epsilons' (relative to them, not to the small difference), so it is compared absolutely
DIFFERENCE_KEYS = {"epsilon_left": 1e-9}
#: diagnostics of the PLD's numerical method, not the guarantee: the exponential tilt is a Newton
#: iterate (any tilt gives a valid bound), and the FFT error bound and +inf mass follow it; a
#: last-unit change moves them by up to 6e-9 relative (seen: tilt 2e-8) while epsilon moves 1e-12
DIAGNOSTIC_KEYS = {"tilt": 1e-6, "fft_error_bound": 1e-6, "infinity_mass": 1e-6}


def load(name: str) -> dict:
    """One golden file of this folder (``commands.json``, ``configs.json``, ``runs.json``)."""
    return json.loads((HERE / name).read_text())


def differences(got, pinned, where: str = "") -> list[str]:
    """Every place where ``got`` departs from ``pinned`` beyond the golden tolerance."""
    if isinstance(pinned, bool) or isinstance(got, bool):
        return [] if got is pinned else [f"{where or '.'}: {got!r} != pinned {pinned!r}"]
    if isinstance(pinned, int | float) and isinstance(got, int | float):
        if isinstance(pinned, float) and isinstance(got, float) and math.isnan(pinned) \
                and math.isnan(got):
            return []
        key = where.rsplit(".", 1)[-1]
        rel = DIAGNOSTIC_KEYS.get(key, REL)
        tolerance = DIFFERENCE_KEYS.get(key, max(rel * max(abs(got), abs(pinned)), ABS))
        if got == pinned or (math.isfinite(got) and math.isfinite(pinned)
                             and abs(got - pinned) <= tolerance):
            return []
        return [f"{where or '.'}: {got!r} != pinned {pinned!r}"]
    if isinstance(pinned, dict) and isinstance(got, dict):
        if set(got) != set(pinned):
            return [f"{where or '.'}: keys {sorted(got)} != pinned {sorted(pinned)}"]
        return [d for key in pinned for d in differences(got[key], pinned[key], f"{where}.{key}")]
    if isinstance(pinned, list) and isinstance(got, list):
        if len(got) != len(pinned):
            return [f"{where or '.'}: {len(got)} items != pinned {len(pinned)}"]
        return [d for k, (a, b) in enumerate(zip(got, pinned, strict=True))
                for d in differences(a, b, f"{where}[{k}]")]
    if type(got) is not type(pinned) or got != pinned:
        return [f"{where or '.'}: {got!r} != pinned {pinned!r}"]
    return []


def assert_matches(got, pinned) -> None:
    """``got`` equals the golden ``pinned`` up to the floats' cross-CPU tolerance (``REL``)."""
    found = differences(got, pinned)
    assert not found, "differs from the golden value:\n" + "\n".join(found[:20])
