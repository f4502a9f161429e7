"""RDP order grids and their validation.

An RDP curve is an array ``rdp[k]`` = RDP at ``orders[k]``. :data:`DEFAULT_ORDERS` and
:data:`LEGACY_ORDERS` are the built-in grids, :func:`resolve_orders` reads an order
specification, and :data:`MAX_SUBSAMPLED_ORDER` caps the orders of the subsampled curves
(their cost grows with the order).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from privfl._validation import check_orders
from privfl.accounting.events import AccountingLimitError

#: The grid of Xie et al. 2023's code / Opacus 0.x: {1.1, 1.2, ..., 10.9} U {12, ..., 63}
#: (11 is absent). Note: that is 99 + 52 = 151 orders; it is Opacus's list exactly.
LEGACY_ORDERS: tuple[float, ...] = tuple(
    [1 + x / 10.0 for x in range(1, 100)] + [float(a) for a in range(12, 64)]
)

#: The default grid (268 orders): fine fractional orders near 1 (1.01 ... 1.99), 2.0 ... 11.9
#: in steps of 0.1, every integer 12 ... 64, then a sparse tail up to 1024 for very small
#: budgets / large noise.
DEFAULT_ORDERS: tuple[float, ...] = tuple(
    [1 + k / 100.0 for k in range(1, 100)]
    + [2 + k / 10.0 for k in range(0, 100)]
    + [float(a) for a in range(12, 65)]
    + [
        72.0,
        80.0,
        96.0,
        112.0,
        128.0,
        160.0,
        192.0,
        224.0,
        256.0,
        320.0,
        384.0,
        448.0,
        512.0,
        640.0,
        768.0,
        1024.0,
    ]
)


def _read_only(orders: tuple[float, ...]) -> np.ndarray:
    array = np.array(orders)
    array.setflags(write=False)
    return array


#: the named grids as read-only arrays (validated once; asked by every accountant every round)
_NAMED_GRIDS = {"default": _read_only(DEFAULT_ORDERS), "legacy": _read_only(LEGACY_ORDERS)}


def resolve_orders(spec: str | Sequence[float] | np.ndarray) -> np.ndarray:
    """Turn an order specification into a sorted array of unique orders (each > 1); a named
    grid comes back as a shared read-only array.

    Parameters
    ----------
    spec : ``"default"`` (:data:`DEFAULT_ORDERS`), ``"legacy"`` (:data:`LEGACY_ORDERS`), a
        comma-separated string such as ``"1.5,2,32"``, or a sequence of numbers.
    """
    if isinstance(spec, str):
        name = spec.strip().lower()
        if name in _NAMED_GRIDS:
            return _NAMED_GRIDS[name]
        parts = [p.strip() for p in name.split(",") if p.strip()]
        try:
            values = [float(p) for p in parts]
        except ValueError as error:
            raise ValueError(
                f"orders = {spec!r} is not allowed: must be 'default', 'legacy' or a "
                "comma-separated list of numbers, each in (1, inf)"
            ) from error
        return check_orders("orders", values)
    return check_orders("orders", spec)


def orders_array(orders: object) -> np.ndarray:
    """Validated 1-D float array of orders, in the caller's order (not sorted). A tuple (the
    accountants' own, asked every round) is validated once (:func:`_checked_tuple`)."""
    if any(orders is grid for grid in _NAMED_GRIDS.values()):
        return orders
    if isinstance(orders, tuple):
        try:
            return _checked_tuple(orders)
        except TypeError:  # an unhashable element: validate it the long way (it fails there)
            pass
    check_orders("orders", orders)
    return np.asarray(orders, dtype=float)


@functools.lru_cache(maxsize=64)
def _checked_tuple(orders: tuple) -> np.ndarray:
    check_orders("orders", orders)
    array = np.asarray(orders, dtype=float)
    array.setflags(write=False)
    return array


#: The largest order at which the subsampled curves (:func:`rdp_poisson_gaussian`,
#: :func:`rdp_without_replacement_gaussian`, :func:`rdp_without_replacement`) are evaluated:
#: their cost grows linearly with the order (one term per integer up to it; about 0.3 s and
#: 60 MB at 1e5). The optimal order is about 2 log(1/delta) / epsilon, so this covers every
#: epsilon above ~2e-4 at delta = 1e-5. Unsubsampled and Laplace curves take any order.
MAX_SUBSAMPLED_ORDER = 1e5


def check_subsampled_orders(alphas: np.ndarray) -> None:
    """Refuse orders above :data:`MAX_SUBSAMPLED_ORDER` (their cost grows with the order)."""
    top = float(np.max(alphas))
    if top > MAX_SUBSAMPLED_ORDER:
        raise AccountingLimitError(
            f"orders = {top:g} is out of range for a subsampled mechanism: each order must be "
            f"at most {MAX_SUBSAMPLED_ORDER:g} (the subsampled RDP sums one term per integer up "
            "to the order, so its time and memory grow with it); use smaller orders (the optimal "
            "order is about 2 log(1/delta) / epsilon), or the pld method"
        )
