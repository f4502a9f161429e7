"""report.html in a real browser: Debian's chromium (``apt-get install chromium
chromium-driver``), driven by selenium; run with ``make test-browser`` (marker ``browser``).

For a small run's report.html (and those of `privfl compare`, `privfl certify` and `privfl
tradeoff`) the tests check that every plot renders (an SVG with one legend
entry per trace, and the visible traces drawn), that the headline is the run's, that the log
toggle and a legend click work, that no request leaves the file (Chrome's performance log: every
``Network.requestWillBeSent`` is for the file itself or a ``data:`` URL) and that the console shows
no error (which includes any Content-Security-Policy violation).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from privfl.config import config_from_dict, load_config
from privfl.runs.experiment import Experiment

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


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A 3-round demo run (PriFedSync: weak and strong scopes, health signals)."""
    raw = load_config(None, []).model_dump(mode="json")
    raw["federated"]["rounds"] = 3
    raw["run"] = {**raw.get("run", {}), "threads": 1}
    out = tmp_path_factory.mktemp("browser") / "run"
    Experiment.create(config_from_dict(raw), out).run()
    return out


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
                     visible: gd.data.filter(t => t.visible === true).length,
                     drawn: gd.querySelectorAll('.scatterlayer g.trace').length,
                     width: gd.getBoundingClientRect().width,
                     height: gd.getBoundingClientRect().height}};""")
        assert state["traces"] == int(driver.find_element("id", plot)
                                      .get_attribute("data-traces")) > 0, plot
        assert state["legend"] == state["traces"], (plot, state)
        assert state["drawn"] >= state["visible"], (plot, state)
        assert state["width"] > 300 and state["height"] > 300, (plot, state)
    return plots


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


def test_report_html_renders_every_plot_offline_without_errors(driver, run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    page = run_dir / "report.html"
    plots = _open_and_check_plots(driver, page)
    assert {"plot-accuracy", "plot-epsilon", "plot-mu", "plot-health"} <= set(plots)
    # the headline is the run's, first on the page
    headline = driver.find_element("id", "headline").text
    assert headline == summary["headline"]["sentence"]
    assert headline.startswith("epsilon = ") and "weak scope" in headline
    # health signals start hidden; a click on a legend entry shows the trace
    hidden = driver.execute_script(
        "return document.getElementById('plot-health').data.map(t => t.visible)")
    assert hidden and set(hidden) == {"legendonly"}
    driver.find_element("css selector", "#plot-health g.legend g.traces rect.legendtoggle"
                        ).click()
    _wait(driver, "return document.getElementById('plot-health').data[0].visible === true")
    # the y-axis toggle: log then linear
    for label in ("log", "linear"):
        buttons = driver.find_elements("css selector", "#plot-epsilon g.updatemenu-button")
        next(b for b in buttons if b.text == label).click()
        _wait(driver, "return document.getElementById('plot-epsilon')._fullLayout.yaxis.type "
                      f"=== '{label}'")
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
