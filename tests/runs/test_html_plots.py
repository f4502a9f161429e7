"""What report.html's plots show on open (privfl.runs.html_plots), their axes and legends
(privfl.runs.html.line_figure), and the vendored plotly.js bundle each page inlines. The same
pages in a real browser: tests/runs/test_report_html_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from privfl.accounting.results import PrivacyResult
from privfl.config import config_from_dict, load_config
from privfl.runs.headline import compose_headline
from privfl.runs.html import (
    PLOTLY_BASIC_VERSION,
    TICK_FORMAT,
    TRACE_TYPES,
    Section,
    line_figure,
    plotly_js,
    render_page,
)
from privfl.runs.html_plots import SHOWN, health_traces, privacy_note, privacy_traces
from privfl.runs.rounding import round_bound

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
#: measured: a demo report.html is 1.21-1.24 MB with the basic bundle (1.19 MB of it), 4.83-4.86
#: MB with plotly's full bundle (docs/run.md)
PAGE_LIMIT = 1_400_000


def _entry(method, kind, epsilon, scope):
    return {"method": method, "kind": kind, "epsilon": epsilon, "scope": scope}


def _dsgd_rows(rounds=6):
    """Rows shaped like DP-DSGD's: per-iteration series of three accountants in scope
    "iteration", per-round RDP series in scope "run" and the final PLD values at the last round."""
    rows = []
    for r in range(1, rounds + 1):
        privacy = [_entry(m, k, 1.5, "iteration") for m, k in
                   (("wcs", "bound"), ("ols", "bound"), ("theorem-4.1", "estimate"))]
        if r > 1:
            privacy += [_entry("wcs-rdp", "bound", 1.0 + r, "run"),
                        _entry("ols-rdp", "bound", 1.2 + r, "run"),
                        _entry("cs-rdp", "reference", 0.5 + r, "run")]
        if r == rounds:
            privacy += [_entry("wcs-pld", "bound", 0.8 + r, "run"),
                        _entry("ols-pld", "bound", 1.0 + r, "run"),
                        _entry("per-s1-convexity-basic", "bound", 144.0, "run")]
        rows.append({"round": r, "privacy": privacy, "train_loss": 2.0 / r})
    return rows


def _headline(method, epsilon, scope):
    result = PrivacyResult(method, "bound", epsilon, 1e-5, "record", "add-remove", "poisson",
                           "every round", 6, {"scope": scope})
    return compose_headline(result, private=True)


def test_dsgd_privacy_plot_shows_the_headline_and_its_scope_first_and_hides_the_rest():
    traces = privacy_traces(_dsgd_rows(), "epsilon", _headline("wcs-pld", 6.8, "run"))
    assert len(traces) == 9
    shown = [t for t in traces if not t["hidden"]]
    assert 1 < len(shown) <= SHOWN
    # the headline first, a lone value at the last round named for what it is
    assert shown[0]["name"] == "final wcs-pld bound (headline)"
    assert shown[0]["x"] == [6] and shown[0]["y"] == [6.8] and shown[0]["final"]
    assert shown[0]["marker"]["symbol"] == "diamond"
    # then the per-round bounds of the headline's scope, tightest first; nothing else
    assert [t["name"] for t in shown[1:]] == ["wcs-rdp bound", "ols-rdp bound"]
    assert {t["group"] for t in shown} == {"run scope (headline)"}
    # the headline's scope group first, the other scope after it; every trace in a group
    groups = [t["group"] for t in traces]
    assert groups == sorted(groups, key=lambda g: g != "run scope (headline)")
    assert "iteration scope" in groups
    # final values that are not the headline are named final, without (headline)
    finals = {t["name"] for t in traces if t["final"]}
    assert finals == {"final wcs-pld bound (headline)", "final ols-pld bound",
                      "final per-s1-convexity-basic bound"}
    assert [t["headline"] for t in traces].count(True) == 1


def test_privacy_plot_without_scopes_or_headline():
    rows = [{"round": r, "privacy": [_entry("rdp", "bound", r, ""),
                                     _entry("gdp-clt", "estimate", 0.5 * r, "")]}
            for r in (1, 2, 3)]
    rows[-1]["privacy"].append(_entry("pld", "bound", 2.5, ""))
    traces = privacy_traces(rows, "epsilon", _headline("pld", 2.5, ""))
    assert [(t["name"], t["hidden"]) for t in traces] == [
        ("final PLD bound (headline)", False), ("RDP bound", False), ("gdp-clt estimate", True)]
    assert all("group" not in t for t in traces)
    # no rigorous headline: the per-round bounds are shown, nothing is named headline
    none = privacy_traces(rows, "epsilon", compose_headline(None, private=True))
    assert [t["name"] for t in none if not t["hidden"]] == ["RDP bound"]
    assert not any(t["headline"] for t in none)
    # only estimates per round (PriFedSync's demo): the estimates are shown beside the headline
    demo = [{"round": r, "privacy": [_entry("gdp-clt", "estimate", r, "weak")]} for r in (1, 2)]
    demo[-1]["privacy"].append(_entry("pld", "bound", 1.9, "weak"))
    shown = [t["name"] for t in privacy_traces(demo, "epsilon", _headline("pld", 1.9, "weak"))
             if not t["hidden"]]
    assert shown == ["final PLD bound (headline)", "gdp-clt estimate"]


def test_privacy_caption_says_what_is_shown():
    traces = privacy_traces(_dsgd_rows(), "epsilon", _headline("wcs-pld", 6.8, "run"))
    note = privacy_note(traces)
    assert note.startswith("Entries named bound (solid) are rigorous upper bounds; entries "
                           "named estimate (dashed) are approximations that can be below the "
                           "true epsilon; entries named reference (dashed) are rigorous")
    assert "A diamond at the last round is a value computed once" in note
    assert "The entry marked (headline) is the headline's number." in note
    assert "6 more lines start hidden" in note
    assert "Solid: rigorous bounds" not in note
    only_bounds = [t for t in traces if t["kind"] == "bound" and not t["final"]]
    note = privacy_note(only_bounds, "mu")
    assert "estimate" not in note and "diamond" not in note and "(headline)" not in note


def test_health_plot_shows_the_loss_and_clipped_fraction():
    rows = [{"round": r, "cohort_size": 10, "train_loss": 2.0 / r, "clipped_fraction": 1 / r,
             "seconds": 0.1} for r in (1, 2, 3)]
    keys = ["cohort_size", "train_loss", "clipped_fraction", "seconds"]
    traces = health_traces(rows, keys, {"cohort_size": True})
    assert [(t["name"], t["hidden"]) for t in traces] == [
        ("cohort_size", True), ("train_loss (outside the guarantee)", False),
        ("clipped_fraction (outside the guarantee)", False),
        ("seconds (outside the guarantee)", True)]
    # neither logged: the first signal that varies, else the first
    traces = health_traces(rows, ["cohort_size", "seconds"], {})
    assert [t["hidden"] for t in traces] == [False, True]
    rows[1]["seconds"] = 0.3
    traces = health_traces(rows, ["cohort_size", "seconds"], {})
    assert [t["hidden"] for t in traces] == [True, False]
    figure = line_figure("plot-health", health_traces(rows, keys, {}), title="t",
                         ytitle="value", log=False, tozero=True)
    assert figure.layout["yaxis"]["rangemode"] == "tozero"
    assert sum(t["visible"] is True for t in figure.data) == 2


def test_axes_ticks_and_legend_height():
    figure = line_figure("p", [{"name": "a", "x": [1, 2], "y": [2.0, 6.0]},
                               {"name": "b", "x": [1, 2], "y": [0.1, 144.0], "hidden": True}],
                         title="t", ytitle="y")
    # log or linear by the traces shown on open; every tick written in full (d3 format ~g)
    assert figure.layout["yaxis"]["type"] == "linear"
    assert figure.layout["yaxis"]["tickformat"] == TICK_FORMAT == "~g"
    shown = line_figure("p", [{"name": "b", "x": [1, 2], "y": [0.1, 144.0]}], title="t",
                        ytitle="y")
    assert shown.layout["yaxis"]["type"] == "log"
    buttons = shown.layout["updatemenus"][0]["buttons"]
    assert [b["args"][0]["yaxis.type"] for b in buttons] == ["linear", "log"]
    # the figure grows with its legend (18 traces in two groups: DP-DSGD), never below 420 px
    traces = [{"name": f"t{i}", "x": [1], "y": [1.0], "group": "g" + str(i % 2)}
              for i in range(18)]
    tall = line_figure("p", traces, title="t", ytitle="y")
    assert tall.layout["height"] >= 21 * 18 + 32 * 2 + 140
    assert line_figure("p", traces[:2], title="t", ytitle="y").layout["height"] == 420


def test_pages_inline_the_vendored_basic_bundle_and_draw_only_its_trace_types():
    js = plotly_js()
    assert js.startswith(f"/**\n* plotly.js (basic - minified) v{PLOTLY_BASIC_VERSION}\n")
    assert 1_000_000 < len(js) < 1_300_000
    assert "</script" not in js
    page = render_page("t", [Section("s", "S", figures=(line_figure(
        "p", [{"name": "a", "x": [1], "y": [1.0]}], title="t", ytitle="y"),))])
    assert len(page.encode()) < PAGE_LIMIT
    assert "plotly.js (basic - minified) v" + PLOTLY_BASIC_VERSION in page


def test_a_lost_bundle_falls_back_to_plotlys_full_one_with_a_warning(monkeypatch):
    from importlib import resources

    class Missing:
        def __truediv__(self, other):
            return self

        def read_text(self, encoding=None):
            raise FileNotFoundError("plotly-basic.min.js")

    monkeypatch.setattr(resources, "files", lambda package: Missing())
    with pytest.warns(UserWarning, match="plotly-basic.min.js is missing"):
        js = plotly_js()
    assert len(js) > 4_000_000


@pytest.fixture(scope="module")
def dsgd_run(tmp_path_factory):
    from privfl.runs.experiment import Experiment

    raw = load_config(CONFIGS / "demo-dp-dsgd.yaml", []).model_dump(mode="json")
    raw["federated"]["rounds"] = 6
    raw["run"] = {**raw.get("run", {}), "threads": 1}
    out = tmp_path_factory.mktemp("dsgd") / "run"
    Experiment.create(config_from_dict(raw), out).run()
    return out


def _figures(page: str) -> dict:
    return json.loads(re.search(r"var figures = (\{.*?\});\n", page, re.S).group(1)
                      .replace("<\\/", "</"))


def test_dsgd_report_html_opens_on_the_headline_with_few_traces(dsgd_run):
    page = (dsgd_run / "report.html").read_text()
    assert len(page.encode()) < PAGE_LIMIT
    summary = json.loads((dsgd_run / "summary.json").read_text())
    figures = _figures(page)
    assert {t["type"] for f in figures.values() for t in f["data"]} <= TRACE_TYPES
    epsilon = figures["plot-epsilon"]["data"]
    assert len(epsilon) > 10  # every accountant and scope is there, most of them hidden
    visible = [t for t in epsilon if t["visible"] is True]
    assert 1 < len(visible) <= SHOWN
    (head,) = [t for t in epsilon if t["name"].endswith("(headline)")]
    assert head is visible[0]
    assert head["name"] == f"final {summary['headline']['method']} bound (headline)"
    # the hover shows 6 significant digits (~g): the value is rounded up there, never below
    assert head["y"] == [round_bound(summary["headline"]["epsilon"], 6)]
    assert head["y"][0] >= summary["headline"]["epsilon"]
    assert {t["legendgroup"] for t in visible} == {"run scope (headline)"}
    assert figures["plot-epsilon"]["layout"]["yaxis"]["tickformat"] == "~g"
    assert "Solid: rigorous bounds" not in page
    assert "A diamond at the last round" in page
    health = figures["plot-health"]["data"]
    assert [t["name"] for t in health if t["visible"] is True] == [
        "train_loss (outside the guarantee)", "clipped_fraction (outside the guarantee)"]
