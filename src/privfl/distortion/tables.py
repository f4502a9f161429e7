"""The noise-calibration table of ``docs/distortion.md``: Lemma 6.8 against the exact calibration.

``python -m privfl.distortion.tables`` prints it (Markdown). Both noise variances are relative
to ``sigma^2`` (they scale with it), for each target TV (``gap = C1 - tau``) and dimension.
"""

from __future__ import annotations

from collections.abc import Sequence

from privfl.distortion.calibrate import noise_calibrations

__all__ = ["DIMENSIONS", "TARGETS", "noise_table", "noise_table_rows"]

#: Dimensions of the table (7,850: logistic regression on MNIST).
DIMENSIONS = (1, 10, 100, 7850, 10**4, 10**6)
#: Target TVs: inside Lemma 6.8's domain (0, 0.01), then beyond it.
TARGETS = (0.001, 0.005, 0.009, 0.05, 0.3)


def noise_table_rows(targets: Sequence[float] = TARGETS,
                     dimensions: Sequence[int] = DIMENSIONS) -> list[dict[str, object]]:
    """One row per (target, d): ``paper``, ``exact`` (sigma_eps^2 / sigma^2), ``ratio`` and
    ``paper_tv`` (the exact TV the paper's noise reaches); ``paper`` is None where Lemma 6.8
    refuses."""
    rows = []
    for target in targets:
        for d in dimensions:
            paper, exact = noise_calibrations(1.0, target, d)
            rows.append({
                "target": target, "dimension": d, "paper": paper.noise_variance,
                "exact": exact.noise_variance, "paper_tv": paper.tv,
                "ratio": (paper.noise_variance / exact.noise_variance
                          if paper.noise_variance is not None else None),
            })
    return rows


def noise_table(targets: Sequence[float] = TARGETS,
                dimensions: Sequence[int] = DIMENSIONS) -> str:
    """The Markdown table of :func:`noise_table_rows`."""
    lines = ["| target TV | d | paper sigma_eps^2 / sigma^2 (Lemma 6.8) | exact sigma_eps^2 / "
             "sigma^2 | paper / exact | TV reached by the paper's noise |",
             "|---|---|---|---|---|---|"]
    for row in noise_table_rows(targets, dimensions):
        paper = row["paper"]
        lines.append(
            f"| {row['target']:g} | {row['dimension']:,} | "
            f"{'refused (gap >= 0.01)' if paper is None else f'{paper:.4g}'} | "
            f"{row['exact']:.4g} | {'-' if paper is None else format(row['ratio'], '.2f')} | "
            f"{'-' if paper is None else format(row['paper_tv'], '.4g')} |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    print(noise_table())
