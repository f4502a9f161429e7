"""The application layer: running an experiment and everything it writes and reads back.

This package sits above the algorithms (:mod:`privfl.algorithms`) and the configuration; the
certification (:mod:`privfl.robustness`), the Flower apps and the command line sit above it
(docs/architecture.md).

* :mod:`privfl.runs.experiment` — :class:`~privfl.runs.experiment.Experiment`, the runner
  (``privfl run``: rounds, budget stops, checkpoints, resume); its jobs are in
  :mod:`~privfl.runs.run_resume`, :mod:`~privfl.runs.run_outputs`,
  :mod:`~privfl.runs.run_stops` and :mod:`~privfl.runs.run_finish`.
* :mod:`privfl.runs.check` and :mod:`privfl.runs.compare` — ``privfl check-privacy`` and
  ``privfl compare``; :mod:`privfl.runs.check_files` — check-privacy's check of what a
  stopped run wrote (summary.json, privacy.json's outputs, report.md, report.html).

* :mod:`privfl.runs.card` — :func:`render_card` (what the numbers mean),
  :func:`render_card` (rich), :func:`card_markdown`.
* :mod:`privfl.runs.plots` — :func:`plot_accuracy`, :func:`plot_privacy` (matplotlib, Agg).
* :mod:`privfl.runs.rundir` — :class:`RunDirectory`: the files of a ``privfl run`` directory.
* :mod:`privfl.runs.markdown` — :func:`run_report_markdown`.

matplotlib is imported only when a plot is drawn. Importing this package registers the built-in
algorithms' configuration models (:func:`privfl.config.algorithms.register_builtin_algorithms`),
so the runner, compare and tradeoff validate configurations without importing torch.
"""

from privfl.config.algorithms import register_builtin_algorithms
from privfl.runs.card import card_markdown, format_number, render_card
from privfl.runs.markdown import run_report_markdown
from privfl.runs.plots import plot_accuracy, plot_privacy
from privfl.runs.rundir import RunDirectory, json_safe

__all__ = [
    "RunDirectory",
    "card_markdown",
    "format_number",
    "json_safe",
    "plot_accuracy",
    "plot_privacy",
    "render_card",
    "run_report_markdown",
]

# the application layer: the built-in algorithms' ``federated`` models (torch-free), once
register_builtin_algorithms()
