"""report.html in a real browser: Debian's chromium (``apt-get install chromium
chromium-driver``), driven by selenium; run with ``make test-browser`` (marker ``browser``).

For a small run's report.html (and those of `privfl compare`, `privfl certify` and `privfl
tradeoff`) the tests check that every plot renders (an SVG with one legend
entry per trace, the visible traces drawn, a legend that fits without scrolling), that the
headline is the run's, that the health plot opens on its main signals, that the log toggle (every
tick a full number), a legend click and hover work with the vendored plotly.js bundle, that no
request leaves the file (Chrome's performance log: every ``Network.requestWillBeSent`` is for the
file itself or a ``data:`` URL) and that the console shows no error (which includes any
Content-Security-Policy violation). DP-DSGD's page (18 privacy traces) opens on at most
:data:`~privfl.runs.html_plots.SHOWN` of them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from privfl.config import config_from_dict, load_config
from privfl.runs.experiment import Experiment
from privfl.runs.html import PLOTLY_BASIC_VERSION
from privfl.runs.html_plots import SHOWN

pytestmark = pytest.mark.browser

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")


def _missing(what: str) -> None:
    message = (f"{what} is not installed: as root, apt-get install chromium chromium-driver; "
               "pip install -e '.[browser]'")
    if os.environ.get("PRIVFL_REQUIRE_BROWSER"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def driver():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium")
    if CHROMIUM is None or DRIVER is None:
        _missing("chromium or chromedriver")
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,2400",
                     "--no-first-run", "--disable-background-networking"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    browser = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield browser
    browser.quit()


def _run(tmp_path_factory, config: Path | None, rounds: int) -> Path:
    raw = load_config(config, []).model_dump(mode="json")
    raw["federated"]["rounds"] = rounds
    raw["run"] = {**raw.get("run", {}), "threads": 1}
    out = tmp_path_factory.mktemp("browser") / "run"
    Experiment.create(config_from_dict(raw), out).run()
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A 3-round demo run (PriFedSync: weak and strong scopes, health signals)."""
    return _run(tmp_path_factory, None, 3)


@pytest.fixture(scope="module")
def dsgd_dir(tmp_path_factory):
    """A 6-round DP-DSGD run: five accountants in two scopes, per-round and final values."""
    return _run(tmp_path_factory, CONFIGS / "demo-dp-dsgd.yaml", 6)


def _wait(driver, script: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for: {script}")


def _open_and_check_plots(driver, page: Path) -> list[str]:
    """Open ``page``; check that every plot rendered; return the plots' ids."""
    driver.get_log("performance")  # drop earlier pages' entries
    driver.get_log("browser")
    driver.get(page.as_uri())
    _wait(driver, "return document.readyState === 'complete'")
    plots = driver.execute_script(
        "return Array.from(document.querySelectorAll('div.plot')).map(d => d.id)")
    for plot in plots:
        _wait(driver, f"return document.querySelector('#{plot} svg.main-svg') !== null")
        state = driver.execute_script(f"""
            const gd = document.getElementById('{plot}');
            return {{traces: gd.data.length,
                     legend: gd.querySelectorAll('g.legend g.traces').length,
                     groups: new Set(gd.data.map(t => t.legendgroup).filter(g => g)).size,
                     visible: gd.data.filter(t => t.visible === true).length,
                     drawn: gd.querySelectorAll('.scatterlayer g.trace, .barlayer g.trace')
                         .length,
                     legendHeight: gd._fullLayout.legend._height,
                     legendShown: gd._fullLayout.legend._effHeight,
                     width: gd.getBoundingClientRect().width,
                     height: gd.getBoundingClientRect().height}};""")
        assert state["traces"] == int(driver.find_element("id", plot)
                                      .get_attribute("data-traces")) > 0, plot
        # one legend entry per trace, and one title per legend group (a scope)
        assert state["legend"] == state["traces"] + state["groups"], (plot, state)
        assert 0 < state["visible"] <= state["drawn"], (plot, state)
        assert state["width"] > 300 and state["height"] > 300, (plot, state)
        # the whole legend fits: plotly scrolls it when its height exceeds the space it has
        assert 0 < state["legendHeight"] <= state["legendShown"], (plot, state)
    assert driver.execute_script("return Plotly.version") == PLOTLY_BASIC_VERSION
    assert page.stat().st_size < 1_400_000  # the basic bundle (the full one: 4.8 MB)
    return plots


def _visible(driver, plot: str) -> list[str]:
    return driver.execute_script(f"return document.getElementById('{plot}').data"
                                 ".filter(t => t.visible === true).map(t => t.name)")


def _switch_axis(driver, plot: str, label: str) -> list[float]:
    """Click the y axis' ``label`` button; the tick labels, each a full number, increasing."""
    buttons = driver.find_elements("css selector", f"#{plot} g.updatemenu-button")
    next(b for b in buttons if b.text == label).click()
    _wait(driver, f"return document.getElementById('{plot}')._fullLayout.yaxis.type "
                  f"=== '{label}'")
    time.sleep(0.3)
    texts = driver.execute_script(f"return Array.from(document.querySelectorAll("
                                  f"'#{plot} g.ytick text')).map(t => t.textContent)")
    values = [float(t.replace("\u2212", "-")) for t in texts]
    assert len(values) >= 2 and values == sorted(set(values)), (plot, label, texts)
    return values


def _hover(driver, plot: str) -> str:
    """Move the mouse over the first visible trace's last point; the hover label's text."""
    from selenium.webdriver import ActionChains

    x, y = driver.execute_script(f"""
        const gd = document.getElementById('{plot}'), L = gd._fullLayout;
        const t = gd.data.findIndex(t => t.visible === true), n = gd.data[t].x.length - 1;
        const box = gd.querySelector('.nsewdrag').getBoundingClientRect();
        return [L.xaxis.l2p(gd.data[t].x[n]) - box.width / 2,
                L.yaxis.l2p(L.yaxis.d2l(gd.data[t].y[n])) - box.height / 2];""")
    drag = driver.find_element("css selector", f"#{plot} .nsewdrag")
    ActionChains(driver).move_to_element_with_offset(drag, int(x), int(y)).perform()
    _wait(driver, f"return document.querySelector('#{plot} .hoverlayer .hovertext') !== null")
    return driver.find_element("css selector", f"#{plot} .hoverlayer").text


def _check_offline_and_quiet(driver, page: Path) -> None:
    """No request left the file, and the console shows no error."""
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] in ("Network.requestWillBeSent", "Network.webSocketCreated"):
            requests.append(message["params"].get("request", message["params"])["url"])
    assert page.as_uri() in requests
    outside = [url for url in requests if not url.startswith(("file://", "data:", "about:"))]
    assert outside == []
    assert {url for url in requests if url.startswith("file://")} == {page.as_uri()}
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []


def _hovers_headline(driver, summary) -> None:
    text = _hover(driver, "plot-epsilon")
    assert "(headline)" in text, text  # the full trace name, not cut at 15 characters
    value = float(re.search(r"\(\d+, ([0-9.e+-]+)\)", text).group(1))
    assert value == pytest.approx(summary["headline"]["epsilon"], rel=1e-5)


def test_report_html_renders_every_plot_offline_without_errors(driver, run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    page = run_dir / "report.html"
    plots = _open_and_check_plots(driver, page)
    assert {"plot-accuracy", "plot-epsilon", "plot-mu", "plot-health"} <= set(plots)
    # the headline is the run's, first on the page
    headline = driver.find_element("id", "headline").text
    assert headline == summary["headline"]["sentence"]
    assert headline.startswith("epsilon = ") and "weak scope" in headline
    # the health plot opens on the training loss and clipped fraction; a click on a hidden
    # signal's legend entry shows it
    assert _visible(driver, "plot-health") == ["train_loss (outside the guarantee)",
                                               "clipped_fraction (outside the guarantee)"]
    hidden = driver.execute_script("return document.getElementById('plot-health').data"
                                   ".findIndex(t => t.visible !== true)")
    driver.find_elements("css selector", "#plot-health g.legend g.traces rect.legendtoggle"
                         )[hidden].click()
    _wait(driver, f"return document.getElementById('plot-health').data[{hidden}].visible "
                  "=== true")
    # the privacy plot opens on the headline's scope, the headline's final value named so
    assert _visible(driver, "plot-epsilon") == ["final PLD bound (headline)",
                                                "gdp-clt estimate"]
    # hover: the headline's diamond shows its full name and the headline's number
    _hovers_headline(driver, summary)
    # the y-axis toggle: log then linear, every tick a full number
    _switch_axis(driver, "plot-epsilon", "log")
    _switch_axis(driver, "plot-epsilon", "linear")
    _check_offline_and_quiet(driver, page)


def test_dsgd_report_html_opens_on_few_traces_with_clean_log_ticks(driver, dsgd_dir):
    summary = json.loads((dsgd_dir / "summary.json").read_text())
    page = dsgd_dir / "report.html"
    _open_and_check_plots(driver, page)
    traces = driver.execute_script("return document.getElementById('plot-epsilon').data.length")
    shown = _visible(driver, "plot-epsilon")
    assert traces > 12 and 1 < len(shown) <= SHOWN
    assert shown[0] == f"final {summary['headline']['method']} bound (headline)"
    _hovers_headline(driver, summary)
    # every trace shown: the legend still fits, and the log ticks (0.11 to 9.5 after 6 rounds)
    # read as full numbers (0.1 0.2 ... 1 2 ... 10), never plotly's bare 5 2 10 5 2 1 5 2 0.1
    driver.execute_script("Plotly.restyle('plot-epsilon', {visible: true})")
    ticks = _switch_axis(driver, "plot-epsilon", "log")
    assert {0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0} <= set(ticks)
    assert driver.execute_script("const L = document.getElementById('plot-epsilon')"
                                 "._fullLayout.legend; return L._height <= L._effHeight")
    _check_offline_and_quiet(driver, page)


def test_compare_html_renders_every_plot_offline_without_errors(driver, run_dir, tmp_path):
    from typer.testing import CliRunner

    from privfl.cli.main import app

    page = tmp_path / "compare.html"
    result = CliRunner().invoke(app, ["compare", str(run_dir), str(run_dir), "--html",
                                      str(page)])
    assert result.exit_code == 0, result.output
    plots = _open_and_check_plots(driver, page)
    assert plots == ["plot-accuracy", "plot-epsilon", "plot-tradeoff"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["headline"]["sentence"] in driver.find_element("id", "runs").text
    _check_offline_and_quiet(driver, page)


def test_screenshot_of_the_demo_report(driver, run_dir, tmp_path):
    """A screenshot (what docs/report-html.png shows) is a non-empty PNG of the page."""
    driver.get((run_dir / "report.html").as_uri())
    _wait(driver, "return document.querySelector('#plot-epsilon svg.main-svg') !== null")
    shot = tmp_path / "report.png"
    assert driver.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


CERTIFY_TINY = {
    "name": "certify-tiny", "seed": 0,
    "data": {"dataset": "mnist-5k", "classes": [0, 1], "partition": "iid", "clients": 12,
             "train_size": 20, "test_size": 5},
    "model": {"name": "logreg"},
    "training": {"local_steps": 3, "batch_size": 10, "optimizer": "sgd", "lr": 0.2},
    "privacy": {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-3, "accountants": ["rdp"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 2, "client_sampling": "fixed-size",
                  "cohort_size": 6},
    "run": {"threads": 1},
}

TRADEOFF_TINY = {
    "name": "tradeoff-tiny", "seed": 1,
    "data": {"dataset": "digits", "partition": "iid", "clients": 4, "train_size": 40,
             "test_size": 20},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 10, "optimizer": "sgd", "lr": 0.1,
                 "weight_decay": 0.01},
    "privacy": {"enabled": False},
    "federated": {"algorithm": "dp-fedavg", "rounds": 3, "client_rate": 1.0},
    "run": {"threads": 1},
    "tradeoff": {"replicas": 32, "gaussian": [0.1, 1.0e+5], "mask": [0.999], "sampling": [0.9],
                 "gaps": [0.005], "protected_rounds": 2},
}


def _cli(*args: str) -> None:
    from typer.testing import CliRunner

    from privfl.cli.main import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


def test_certify_html_renders_every_plot_offline_without_errors(driver, tmp_path):
    import yaml

    config = tmp_path / "certify.yaml"
    config.write_text(yaml.safe_dump(CERTIFY_TINY))
    out = tmp_path / "cert"
    _cli("certify", str(config), "--models", "4", "--attack", "backdoor", "--attackers", "1",
         "--out", str(out))
    page = out / "report.html"
    plots = _open_and_check_plots(driver, page)
    assert plots == ["plot-certified", "plot-inefficacy"]
    data = json.loads((out / "certify.json").read_text())
    assert data["privacy_lines"][0] in driver.find_element("id", "privacy").text
    assert "attacked replicas" in driver.find_element("id", "outputs").text
    _check_offline_and_quiet(driver, page)


def test_tradeoff_html_renders_every_plot_offline_without_errors(driver, tmp_path):
    import yaml

    config = tmp_path / "tradeoff.yaml"
    config.write_text(yaml.safe_dump(TRADEOFF_TINY))
    out = tmp_path / "tradeoff"
    _cli("tradeoff", str(config), "--out", str(out))
    page = out / "report.html"
    plots = _open_and_check_plots(driver, page)
    assert plots == ["plot-frontier"]
    assert "gaussian-paper" in driver.find_element("id", "points").text
    _check_offline_and_quiet(driver, page)


def test_audit_html_renders_the_histogram_and_roc_offline_without_errors(driver, tmp_path):
    out = tmp_path / "audit"
    _cli("audit", "run", str(CONFIGS / "demo-dp-fedavg.yaml"), "--canaries", "60", "--set",
         "federated.rounds=3", "--set", "privacy.accountants=[rdp]", "--out", str(out))
    page = out / "report.html"
    plots = _open_and_check_plots(driver, page)
    assert plots == ["plot-audit-scores", "plot-audit-roc"]
    audit = json.loads((out / "audit.json").read_text())
    # the histogram's two bar traces hold every canary, split by the secret bit
    counts = driver.execute_script(
        "return document.getElementById('plot-audit-scores').data"
        ".map(t => [t.name, t.y.reduce((a, b) => a + b, 0)])")
    assert dict(counts) == {"inserted": audit["canaries_inserted"],
                            "not inserted": audit["canaries_not_inserted"]}
    text = driver.find_element("id", "audit").text
    assert f"Verdict: {audit['verdict']}" in text and "epsilon_lower" in text
    assert "audit.json" in driver.find_element("id", "outputs").text
    _check_offline_and_quiet(driver, page)
