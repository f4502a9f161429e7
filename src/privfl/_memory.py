"""Memory sizes: parse a budget (``"512MiB"``) and read the memory this machine has free.

Torch-free, so that configurations validate without loading torch (``run.memory_budget``).
"""

from __future__ import annotations

import re

from privfl._validation import check_int

__all__ = ["MIN_BUDGET", "free_system_memory", "parse_memory_budget"]

#: Smallest budget a run may set (bytes).
MIN_BUDGET = 1 << 20
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 1 << 10, "m": 10**6, "mb": 10**6,
          "mib": 1 << 20, "g": 10**9, "gb": 10**9, "gib": 1 << 30, "t": 10**12, "tb": 10**12,
          "tib": 1 << 40}


def parse_memory_budget(value: int | str, name: str = "memory_budget") -> int:
    """Bytes from an int or a string with a unit (``"512MiB"``, ``"2 GB"``, ``"1.5GiB"``;
    k/M/G/T are powers of 1000, KiB/MiB/GiB/TiB of 1024); at least :data:`MIN_BUDGET` (1 MiB)."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", value)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise ValueError(f"{name} = {value!r} is not allowed: must be a number of bytes "
                             "or a size such as '512MiB', '2GB', '1.5GiB'")
        value = int(float(match.group(1)) * _UNITS[unit])
    if isinstance(value, int) and not isinstance(value, bool) and value < MIN_BUDGET:
        raise ValueError(f"{name} = {value!r} is out of range: must be at least "
                         f"{MIN_BUDGET} bytes (1 MiB)")
    return check_int(name, value, MIN_BUDGET)


def free_system_memory() -> int | None:
    """Bytes of memory available to new work: ``MemAvailable`` of ``/proc/meminfo``, psutil's
    ``virtual_memory().available`` where there is no ``/proc`` and psutil is installed; None
    if neither is there."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import psutil  # optional
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)
