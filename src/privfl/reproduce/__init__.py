"""Reproductions of the five papers privfl implements: ``privfl reproduce PAPER``.

Each paper has one module (:mod:`.zheng2021`, :mod:`.zhang2022`, :mod:`.xie2023`,
:mod:`.hasircioglu2022`, :mod:`.asoodeh2021`) whose ``reproduce(scale, out, ...)`` returns a
:class:`~privfl.reproduce.rows.Reproduction`: rows that compare the paper's values (as printed,
with their table, figure or equation) with privfl's, each with a relative difference, a
tolerance and a verdict (:func:`~privfl.reproduce.rows.compare`), and the regenerated figures.
The paper values are transcribed from the papers; privfl's come from its public accountants,
distortion measures and the experiment runner. :func:`~privfl.reproduce.report.reproduce` runs
one and writes table.md, rows.json and report.html (:mod:`.html`); :mod:`.papers` is the
registry; :mod:`.training` runs the quick and paper-scale training (one run: :mod:`.runner`)
and :mod:`.seeds` judges a training row by several seeds; :mod:`.document` writes
docs/reproductions.md.

>>> from privfl.reproduce.report import reproduce
>>> rep = reproduce("asoodeh2021")  # doctest: +SKIP
>>> rep.counts()  # doctest: +SKIP
"""

from __future__ import annotations

from privfl.reproduce.papers import PAPERS, SCALES, paper
from privfl.reproduce.rows import DIFFERS, MATCH, Reproduction, Row, compare

__all__ = ["DIFFERS", "MATCH", "PAPERS", "SCALES", "Reproduction", "Row", "compare", "paper"]
