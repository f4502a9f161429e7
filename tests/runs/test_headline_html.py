"""The headline sentence, provenance, report.html's content and the classification of the new
files (the browser test of report.html is tests/runs/test_report_html_browser.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markupsafe import escape

from privfl.accounting.results import PrivacyResult
from privfl.algorithms.base import budget_results, tightest_bound
from privfl.algorithms.outputs import classify_metrics, file_outputs
from privfl.config import config_from_dict, load_config
from privfl.runs.experiment import Experiment, privacy_plan
from privfl.runs.headline import compose_headline, format_delta, method_name
from privfl.runs.html import Section, line_figure, render_page
from privfl.runs.plan_headline import plan_headline
from privfl.runs.provenance import PROVENANCE_KEYS, run_provenance

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _result(method, kind, epsilon, scope, unit="record"):
    return PrivacyResult(method, kind, epsilon, 1e-5, unit, "replace-one", "poisson",
                         "every round", 10, {"scope": scope})


def test_format_delta_and_method_names():
    assert format_delta(1e-5) == "1e-5"
    assert format_delta(1e-12) == "1e-12"
    assert format_delta(0.001) == "0.001"
    assert format_delta(2.5e-7) == "2.5e-7"
    assert method_name("pld") == "PLD" and method_name("rdp") == "RDP"
    assert method_name("gdp-clt") == "gdp-clt" and method_name("contraction") == "contraction"


def test_demo_headline_is_the_budget_number_with_its_labels():
    """The demo's planned headline (30 rounds): the PLD bound of the weak scope, 3.852 (3.85104
    rounded up; a guarantee people publish: epsilon <= 4 at delta 1e-5), taken from budget_results/
    tightest_bound, never recomputed, with its reading in plain words."""
    plan = privacy_plan(load_config(None, []))
    results = plan.results(30)
    headline = plan_headline(plan, results)
    best = tightest_bound(budget_results(plan, results))
    assert headline.result is best
    assert headline.sentence == ("epsilon = 3.852 at delta = 1e-5 (PLD bound, record level, "
                                 "weak scope).")
    assert headline.advice.startswith("Report the weak scope: any one other client sees")
    strong = headline.others["strong"]
    assert strong.kind == "bound" and strong.epsilon > 3 * best.epsilon
    assert "epsilon = 14.04 at delta = 1e-5 (PLD bound, record level, strong scope)" in (
        headline.advice)
    assert headline.to_dict()["epsilon"] == pytest.approx(3.851, abs=0.0005)
    assert best.epsilon <= 4 and best.delta <= 1e-5
    # e^3.85104 x 1% + 1e-5 = 47.05 %; e^3.85104 / (1 + e^3.85104) = 97.92 %: rounded up to
    # three significant digits; PriFedSync's record guarantee is replace-one
    assert "catches at most 47.1% of those that had the second" in headline.reading
    assert "ends at most 98% sure" in headline.reading
    assert "may be able to tell which of two values that record had" in headline.reading
    assert "this epsilon is reasonable, a name for what" in headline.reading
    assert headline.to_dict()["reading"] == headline.reading


def test_headline_never_uses_an_estimate_or_another_scope():
    results = [_result("gdp-clt", "estimate", 1.0, "weak"), _result("pld", "bound", 3.0, "weak"),
               _result("rdp", "bound", 3.5, "weak"), _result("pld", "bound", 0.5, "other")]

    class Plan:
        private, unit, primary_scope = True, "record", "weak"

    headline = plan_headline(Plan(), results)
    assert headline.result.method == "pld" and headline.result.epsilon == 3.0
    assert headline.others == {"other": results[3]}
    only_estimates = plan_headline(Plan(), results[:1])
    assert only_estimates.result is None and only_estimates.sentence.startswith("No rigorous")
    assert compose_headline(None, private=False).sentence.startswith("No privacy guarantee")


def test_provenance_names_versions_and_a_config_digest():
    import privfl

    raw = load_config(None, []).model_dump(mode="json")
    first = run_provenance(raw)
    assert tuple(first) == PROVENANCE_KEYS
    assert first["privfl"] == privfl.__version__
    assert first["python"] == ".".join(map(str, sys.version_info[:3]))
    assert re.fullmatch(r"[0-9a-f]{64}", first["config_sha256"])
    assert run_provenance(dict(raw))["config_sha256"] == first["config_sha256"]
    changed = {**raw, "seed": raw["seed"] + 1}
    assert run_provenance(changed)["config_sha256"] != first["config_sha256"]
    assert isinstance(first["threads"], int) and first["threads"] >= 1
    with pytest.raises(ValueError, match="config = list"):
        run_provenance([])


def test_page_is_self_contained_and_escapes_text():
    figure = line_figure("plot-a", [{"name": "</script><b>x", "x": [1, 2], "y": [1.0, 1e3]},
                                    {"name": "hidden", "x": [1], "y": [2.0], "hidden": True}],
                         title="t", ytitle="y")
    assert figure.layout["yaxis"]["type"] == "log"  # spans more than a factor 30
    assert [d["visible"] for d in figure.data] == [True, "legendonly"]
    page = render_page("<title>", [Section("s", "S", text=("a < b",), figures=(figure,))])
    assert "&lt;title&gt;" in page and "a &lt; b" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    # nothing loads from elsewhere: no src/href attributes at all, and the data JSON cannot
    # close its script element
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", page)
    assert "</script><b>" not in page
    with pytest.raises(ValueError, match="not unique"):
        render_page("x", [Section("a", "A", figures=(figure,)), Section("b", "B",
                                                                     figures=(figure,))])


def test_report_html_and_health_png_are_classified_like_report_md():
    metrics = classify_metrics(["round", "epsilon", "train_loss", "global_accuracy"],
                               {"train_loss": (False, "unnoised"),
                                "global_accuracy": (True, "test data")})
    common = dict(metrics=metrics, accuracy_keys=["global_accuracy"], private_name="r.private",
                  checkpoints=True, tensorboard=False, model_file=False)
    for secure in (False, True):
        for guarantee_only in (False, True):
            files = {o.name: o for o in file_outputs(secure=secure, guarantee_only=guarantee_only,
                                                     health=["train_loss"], **common)}
            assert (files["report.html"].covered, files["report.html"].reason) == (
                files["report.md"].covered, files["report.md"].reason)
            assert files["health.png"].covered is guarantee_only
    files = {o.name: o for o in file_outputs(secure=True, guarantee_only=False,
                                             health=["train_loss"], **common)}
    assert "train_loss" in files["report.html"].reason
    assert "wall_seconds" in files["report.html"].reason  # provenance shows the wall time
    assert "health.png" not in {o.name for o in file_outputs(secure=True, guarantee_only=False,
                                                            **common)}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    raw = load_config(CONFIGS / "demo-projected-sgd.yaml", []).model_dump(mode="json")
    raw["federated"]["rounds"] = 3
    out = tmp_path_factory.mktemp("run") / "run"
    result = Experiment.create(config_from_dict(raw), out).run()
    return out, result


def test_run_writes_headline_first_provenance_and_report_html(tiny_run):
    out, result = tiny_run
    summary = json.loads((out / "summary.json").read_text())
    headline = summary["headline"]
    assert headline == result.summary["headline"]
    assert headline["sentence"].startswith("epsilon = ")
    assert headline["epsilon"] == pytest.approx(summary["final"]["epsilon"])
    report = (out / "report.md").read_text().splitlines()
    assert report[2] == f"**{headline['sentence']}**"
    assert set(PROVENANCE_KEYS) <= set(summary["provenance"])
    assert "## Provenance" in "\n".join(report)
    html = (out / "report.html").read_text()
    assert f'id="headline">{headline["sentence"]}</p>' in html
    # report.md's Files section, in report.html too: the files, the check-privacy pointer and
    # the resume hint (issue 45 item 8)
    files = "\n".join(report).split("## Files\n", 1)[1].split("## Provenance", 1)[0]
    paragraphs = [p.strip().replace("`", "") for p in files.split("\n\n") if p.strip()]
    assert len(paragraphs) == 2 and f"privfl check-privacy {out} recomputes" in paragraphs[0]
    assert "privfl run --resume" in paragraphs[1] or "cannot be continued" in paragraphs[1]
    assert 'id="files"' in html
    for paragraph in paragraphs:
        assert f"<p>{escape(paragraph)}</p>" in html, paragraph
    names = {o["name"]: o for o in summary["outputs"]}
    assert names["report.html"]["covered"] == names["report.md"]["covered"]
    assert {"report.html", "health.png"} <= set(names)
    figures = json.loads(re.search(r"var figures = (\{.*?\});\n", html, re.S).group(1)
                         .replace("<\\/", "</"))
    assert set(figures) >= {"plot-accuracy", "plot-epsilon", "plot-health"}
    health = figures["plot-health"]["data"]
    # projected SGD logs no training loss or clipped fraction: the first signal that varies
    # is shown on open, the others start hidden
    assert {t["name"]: t["visible"] for t in health} == {
        "users": "legendonly", "seconds (outside the guarantee)": True}
    assert len(set(health[0]["y"])) == 1  # users: constant
    uncovered = {o["name"] for o in summary["outputs"] if o["kind"] == "metric"
                 and not o["covered"]}
    for trace in health:
        key = trace["name"].removesuffix(" (outside the guarantee)")
        assert (key in uncovered) == trace["name"].endswith("(outside the guarantee)")
    assert (out / "health.png").stat().st_size > 1000


def test_report_modules_do_not_import_torch():
    code = ("import sys; import privfl.runs.html, privfl.runs.html_run, "
            "privfl.runs.headline, privfl.runs.provenance; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_compare_html_flags_different_units_and_datasets(tmp_path):
    from privfl.runs.compare import RunRecord, common_rounds, comparison_rows
    from privfl.runs.html_compare import comparison_html

    def run(name, unit, eps):
        rows = tuple({"round": r, "global_accuracy": 0.1 * r, "epsilon": eps * r}
                     for r in (1, 2, 3))
        return RunRecord(tmp_path / name, name, "dp-fedavg", True, 1e-5, unit, "poisson",
                         (("global_accuracy", "global model"),), rows)

    runs = [run("a", "client", 1.0), run("b", "record", 2.0)]
    page = comparison_html(runs, comparison_rows(runs, common_rounds(runs)),
                           datasets={"a": "digits", "b": "mnist-5k"})
    assert "different units (client, record)" in page
    assert "different datasets (a: digits, b: mnist-5k)" in page
    figures = json.loads(re.search(r"var figures = (\{.*?\});\n", page, re.S).group(1))
    tradeoff = figures["plot-tradeoff"]["data"]
    assert [t["x"] for t in tradeoff] == [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]
    assert tradeoff[0]["y"] == pytest.approx([0.1, 0.2, 0.3])
