"""The application layer: running an experiment and everything it writes and reads back.

This package sits above the algorithms (:mod:`privfl.algorithms`), the certification
(:mod:`privfl.robustness`) and the configuration; only the command line sits above it.

* :mod:`privfl.report.experiment` — :class:`~privfl.report.experiment.Experiment`, the runner
  (``privfl run``: rounds, budget stops, checkpoints, resume); its jobs are in
  :mod:`~privfl.report.run_resume`, :mod:`~privfl.report.run_outputs`,
  :mod:`~privfl.report.run_stops` and :mod:`~privfl.report.run_finish`.
* :mod:`privfl.report.check` and :mod:`privfl.report.compare` — ``privfl check-privacy`` and
  ``privfl compare``; :mod:`privfl.report.check_files` — check-privacy's check of what a
  stopped run wrote (summary.json, privacy.json's outputs, report.md, report.html).

* :mod:`privfl.report.card` — :func:`render_card` (what the numbers mean),
  :func:`render_card` (rich), :func:`card_markdown`.
* :mod:`privfl.report.plots` — :func:`plot_accuracy`, :func:`plot_privacy` (matplotlib, Agg).
* :mod:`privfl.report.rundir` — :class:`RunDirectory`: the files of a ``privfl run`` directory.
* :mod:`privfl.report.markdown` — :func:`run_report_markdown`.

matplotlib is imported only when a plot is drawn. Importing this package registers the built-in
algorithms' configuration models (:func:`privfl.config.algorithms.register_builtin_algorithms`),
so the runner, compare and tradeoff validate configurations without importing torch.
"""

from privfl.config.algorithms import register_builtin_algorithms
from privfl.report.card import card_markdown, format_number, render_card
from privfl.report.markdown import run_report_markdown
from privfl.report.plots import plot_accuracy, plot_privacy
from privfl.report.rundir import RunDirectory, json_safe

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
