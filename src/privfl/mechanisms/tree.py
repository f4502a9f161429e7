"""Tree aggregation for private prefix sums (the noise of DP-FTRL, Kairouz et al. 2021).

Steps are 0-based, ``x_0, ..., x_{T-1}``. A **node** ``(h, j)`` at level ``h`` covers steps
``[j 2^h, (j + 1) 2^h)`` and exists once it is complete (``(j + 1) 2^h <= T``); its noisy
value is ``y = sum of x over the node + N(0, sigma^2)``, drawn when it completes. The prefix
sum of the first ``t`` steps is the sum over the dyadic decomposition of ``t`` (one node per
set bit of ``t``), so the online tree uses only nodes complete by step t.

As a matrix factorization ``A = B C`` (Denisov et al. 2022): ``C`` (nodes x T, 0/1 entries,
:func:`tree_encoder`) maps steps to nodes, ``B`` (T x nodes, :func:`tree_decoder`) picks the
decomposition. Each step lies in ``L = ceil(log2(T + 1))`` = ``T.bit_length()`` complete nodes,
so under single participation and replace-with-zero the sensitivity is ``sqrt(L)``.

Estimators:

* ``"vanilla"``: the sum of the decomposition's noisy nodes; the prefix sum at t has variance
  ``sigma^2 popcount(t)``.
* ``"honaker"`` (online variance reduction, Honaker 2015; Kairouz et al. 2021, App. B.1): each
  complete node's estimate combines its own noisy value with the sum of its children's
  estimates by inverse-variance weighting, ``e = (c y + v_own (e_l + e_r)) / (c + v_own)`` with
  ``c = var(e_l) + var(e_r)``; the estimate's variance ``v_h`` satisfies ``v_0 = sigma^2`` and
  ``v_h = 2 v_{h-1} sigma^2 / (2 v_{h-1} + sigma^2)``. Uses only complete nodes, so it is online;
  the decomposition's nodes have disjoint noise, so the prefix variance is the sum of their v_h.
* ``"least-squares"`` (offline, :func:`tree_decoder` only): ``B = A C^+``, Honaker's fully
  efficient estimator, which also uses nodes completed later; reference only.

Restarts: :class:`TreeAggregator` with ``restart_every = R`` starts a new tree every R steps and
adds the finished trees' final estimates as a carry (each restarted tree is a separate
single-participation tree over R steps: a client participating once per tree has squared
sensitivity ``(number of trees) * ceil(log2(R + 1))``, :func:`tree_sensitivity`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from privfl._validation import check_choice, check_int, check_nonnegative

ESTIMATORS = ("vanilla", "honaker")
DECODERS = ("vanilla", "honaker", "least-squares")


def tree_levels(steps: int) -> int:
    """``ceil(log2(T + 1))``: the complete nodes one step lies in at most (T >= 1)."""
    steps = check_int("steps", steps, minimum=1)
    return steps.bit_length()


def tree_sensitivity(steps: int, trees: int = 1) -> float:
    """L2 sensitivity (clip units, replace-with-zero) of ``trees`` restarted trees of ``steps``
    each, one participation per tree: ``sqrt(trees * ceil(log2(steps + 1)))``."""
    trees = check_int("trees", trees, minimum=1)
    return math.sqrt(trees * tree_levels(steps))


def tree_nodes(steps: int) -> list[tuple[int, int]]:
    """The complete nodes ``(h, j)`` of a tree over ``steps``, in the order they complete."""
    steps = check_int("steps", steps, minimum=1)
    nodes = []
    for t in range(1, steps + 1):  # at the end of step t - 1 the nodes ending at t complete
        h = 0
        while t % (1 << h) == 0:
            nodes.append((h, t // (1 << h) - 1))
            h += 1
    return nodes


def decomposition(t: int) -> list[tuple[int, int]]:
    """The dyadic nodes whose union is steps ``[0, t)`` (one per set bit of t, high to low)."""
    t = check_int("t", t, minimum=0)
    nodes, start = [], 0
    for h in range(t.bit_length() - 1, -1, -1):
        if t >> h & 1:
            nodes.append((h, start >> h))
            start += 1 << h
    return nodes


def tree_encoder(steps: int) -> np.ndarray:
    """``C``: one row per complete node (completion order), ``C[n, s] = 1`` if s is in node n."""
    nodes = tree_nodes(steps)
    c = np.zeros((len(nodes), steps))
    for row, (h, j) in enumerate(nodes):
        c[row, j << h : (j + 1) << h] = 1.0
    return c


def restarted_tree_encoder(steps: int, restart_every: int = 0) -> np.ndarray:
    """``C`` of trees restarted every R = ``restart_every`` steps (0: one tree): block diagonal,
    one :func:`tree_encoder` block per tree (the last one over the remaining steps)."""
    steps = check_int("steps", steps, minimum=1)
    period = check_int("restart_every", restart_every, minimum=0) or steps
    blocks = [tree_encoder(min(period, steps - start)) for start in range(0, steps, period)]
    c = np.zeros((sum(b.shape[0] for b in blocks), steps))
    row = 0
    for start, block in zip(range(0, steps, period), blocks, strict=True):
        c[row : row + block.shape[0], start : start + block.shape[1]] = block
        row += block.shape[0]
    return c


def honaker_variances(levels: int) -> np.ndarray:
    """``v_h / sigma^2`` for h < levels: ``v_0 = 1``, ``v_h = 2 v_{h-1} / (2 v_{h-1} + 1)``."""
    levels = check_int("levels", levels, minimum=1)
    v = np.ones(levels)
    for h in range(1, levels):
        v[h] = 2.0 * v[h - 1] / (2.0 * v[h - 1] + 1.0)
    return v


def _own_weight(h: int) -> float:
    """Weight on a level-h node's own noisy value in the Honaker estimate (1 at leaves)."""
    if h == 0:
        return 1.0
    c = 2.0 * honaker_variances(h)[h - 1]
    return c / (c + 1.0)


def tree_decoder(steps: int, estimator: str = "vanilla") -> np.ndarray:
    """``B`` with ``A = B C`` (A the T x T prefix-sum matrix, C = :func:`tree_encoder`)."""
    steps = check_int("steps", steps, minimum=1)
    estimator = check_choice("estimator", estimator, DECODERS)
    c = tree_encoder(steps)
    if estimator == "least-squares":
        return np.tril(np.ones((steps, steps))) @ np.linalg.pinv(c)
    index = {node: row for row, node in enumerate(tree_nodes(steps))}
    # weights[n] = the estimate of node n as a combination of noisy node values
    weights: dict[tuple[int, int], np.ndarray] = {}
    for node in tree_nodes(steps):
        h, j = node
        w = np.zeros(len(index))
        w[index[node]] = 1.0
        if estimator == "honaker" and h > 0:
            a = _own_weight(h)
            w = a * w + (1.0 - a) * (weights[(h - 1, 2 * j)] + weights[(h - 1, 2 * j + 1)])
        weights[node] = w
    b = np.zeros((steps, len(index)))
    for t in range(1, steps + 1):
        for node in decomposition(t):
            b[t - 1] += weights[node]
    return b


def tree_step_variances(
    steps: int, estimator: str = "vanilla", restart_every: int = 0
) -> np.ndarray:
    """Variance of each released prefix sum (per coordinate, per unit node noise variance).

    ``vanilla``: ``popcount(t)``; ``honaker``: ``sum of v_h`` over the decomposition's levels.
    With restarts every R steps the finished trees' totals add their variances.
    """
    steps = check_int("steps", steps, minimum=1)
    estimator = check_choice("estimator", estimator, ESTIMATORS)
    period = check_int("restart_every", restart_every, minimum=0) or steps
    v = honaker_variances(tree_levels(period)) if estimator == "honaker" else None
    out = np.empty(steps)
    for t in range(1, steps + 1):
        trees, within = divmod(t, period)
        total = 0.0
        for part, count in ((period, trees), (within, 1)):
            if count and part:
                bits = [h for h in range(part.bit_length()) if part >> h & 1]
                total += count * (len(bits) if v is None else float(v[bits].sum()))
        out[t - 1] = total
    return out


NoiseSource = Callable[[int, int, tuple[int, ...]], np.ndarray]


@dataclass
class _Node:
    level: int
    index: int
    total: np.ndarray  # exact sum of the node's steps (never released)
    estimate: np.ndarray


class TreeAggregator:
    """Online private prefix sums by tree aggregation (memory: O(log T) vectors).

    Parameters
    ----------
    shape : shape of one step's vector.
    noise_std : sigma, std of each node's Gaussian noise (noise multiplier x clip norm).
    estimator : ``"vanilla"`` or ``"honaker"`` (module docstring).
    restart_every : R > 0 starts a new tree every R steps (0: never).
    rng : numpy Generator for the noise (ignored when ``noise`` is given).
    noise : optional ``noise(level, index, shape) -> array`` giving each node's noise (tests,
        or a secure source); ``index`` counts nodes within the current tree.
    """

    def __init__(
        self,
        shape: tuple[int, ...] | int,
        noise_std: float,
        *,
        estimator: str = "vanilla",
        restart_every: int = 0,
        rng: np.random.Generator | None = None,
        noise: NoiseSource | None = None,
    ) -> None:
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        for n in self.shape:
            check_int("shape entry", n, minimum=1)
        self.noise_std = check_nonnegative("noise_std", noise_std)
        self.estimator = check_choice("estimator", estimator, ESTIMATORS)
        self.restart_every = check_int("restart_every", restart_every, minimum=0)
        self._rng = rng if rng is not None else np.random.default_rng()
        self._noise = noise
        self._stack: list[_Node] = []
        self._carry = np.zeros(self.shape)
        self._within = 0  # steps in the current tree
        self.steps = 0

    def _draw(self, level: int, index: int) -> np.ndarray:
        if self._noise is not None:
            value = np.asarray(self._noise(level, index, self.shape), dtype=float)
            if value.shape != self.shape:
                raise ValueError(f"noise returned shape {value.shape}: must be {self.shape}")
            return value
        return self._rng.normal(0.0, self.noise_std, self.shape)

    def step(self, x: object) -> np.ndarray:
        """Add step t's vector; return the private estimate of the sum of steps 0..t."""
        value = np.asarray(x, dtype=float)
        if value.shape != self.shape or not np.all(np.isfinite(value)):
            raise ValueError(f"x must be finite with shape {self.shape}, got {value.shape}")
        node = _Node(0, self._within, value.copy(), value + self._draw(0, self._within))
        self._within += 1
        self.steps += 1
        while self._stack and self._stack[-1].level == node.level:
            left = self._stack.pop()
            level = node.level + 1
            total = left.total + node.total
            noisy = total + self._draw(level, left.index // 2)
            estimate = noisy
            if self.estimator == "honaker":
                a = _own_weight(level)
                estimate = a * noisy + (1.0 - a) * (left.estimate + node.estimate)
            node = _Node(level, left.index // 2, total, estimate)
        self._stack.append(node)
        result = self._carry + sum(n.estimate for n in self._stack)
        if self.restart_every and self._within == self.restart_every:
            self._carry = result.copy()
            self._stack.clear()
            self._within = 0
        return result

    def state_dict(self) -> dict[str, object]:
        """Everything :meth:`step` reads besides the noise source (for an exact resume):
        numpy arrays and ints."""
        return {"steps": self.steps, "within": self._within, "carry": self._carry.copy(),
                "stack": [(n.level, n.index, n.total.copy(), n.estimate.copy())
                          for n in self._stack]}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict` output (same shape)."""
        carry = np.asarray(state["carry"], dtype=float)
        if carry.shape != self.shape:
            raise ValueError(f"state['carry'] has shape {carry.shape}: must be {self.shape}")
        self.steps = check_int("state['steps']", state["steps"], minimum=0)
        self._within = check_int("state['within']", state["within"], minimum=0)
        self._carry = carry.copy()
        self._stack = [_Node(int(h), int(j), np.asarray(t, dtype=float).reshape(self.shape),
                             np.asarray(e, dtype=float).reshape(self.shape))
                       for h, j, t, e in state["stack"]]  # type: ignore[union-attr]
