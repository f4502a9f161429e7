"""The trade-off curve of a guarantee (privfl.accounting.fdp.curve, ``--fdp-curve``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from privfl.accounting.events import dpsgd_event
from privfl.accounting.fdp.curve import tradeoff_curves
from privfl.accounting.fdp.gaussian import GaussianTradeOff
from privfl.cli.main import app


@pytest.mark.parametrize(("z", "steps"), [(1.0, 1), (2.0, 10), (5.0, 100)])
def test_a_bound_curve_lies_under_the_exact_trade_off_and_close_to_it(z, steps):
    """T unsampled Gaussian steps are exactly G_mu with mu = sqrt(T) / z (Dong, Roth & Su
    2019, Cor. 3.3): the bounds' curves never lie above it (they never overstate privacy), and
    the PLD's (exact here: the closed form) comes within 0.01 of it (0.002 measured)."""
    event = dpsgd_event(z, 1.0, steps)
    exact = GaussianTradeOff(math.sqrt(steps) / z)
    curves = tradeoff_curves(event, 1e-5, ("rdp", "pld"))
    assert {c["method"] for c in curves} == {"rdp", "pld"}
    for curve in curves:
        alpha, beta = np.array(curve["alpha"]), np.array(curve["beta"])
        truth = exact(alpha)
        assert np.all(beta <= truth + 1e-9), curve["method"]
        if curve["method"] == "pld":
            assert np.max(truth - beta) < 0.01


def test_curves_are_trade_off_functions_and_name_what_they_are():
    curves = tradeoff_curves(dpsgd_event(1.1, 0.01, 1000), 1e-5)
    kinds = {c["method"]: c["kind"] for c in curves}
    assert kinds == {"rdp": "bound", "pld": "bound", "gdp-clt": "estimate"}
    for curve in curves:
        alpha, beta = np.array(curve["alpha"]), np.array(curve["beta"])
        assert alpha[0] == 0 and alpha[-1] == 1
        assert np.all(np.diff(beta) <= 1e-12)  # non-increasing
        assert np.all(beta >= 0) and np.all(beta <= 1 - alpha + 1e-12)  # at most perfect privacy
        assert "bound" in curve["basis"] or "estimate" in curve["basis"]
    pld = next(c for c in curves if c["method"] == "pld")
    rdp = next(c for c in curves if c["method"] == "rdp")
    assert np.mean(pld["beta"]) >= np.mean(rdp["beta"])  # the tighter bound shows more privacy


def test_account_writes_the_curve_as_json_and_a_plot(tmp_path):
    out = tmp_path / "curve.json"
    result = CliRunner().invoke(app, [
        "account", "dpsgd", "--sampling-rate", "0.01", "--noise-multiplier", "1.1",
        "--steps", "1000", "--delta", "1e-5", "--fdp-curve", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["command"] == "account dpsgd" and data["delta"] == 1e-5
    assert {c["method"] for c in data["curves"]} == {"rdp", "pld", "gdp-clt"}
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    refused = CliRunner().invoke(app, [
        "account", "dpsgd", "--sampling-rate", "0.01", "--noise-multiplier", "1.1",
        "--steps", "10", "--delta", "1e-5", "--fdp-curve", str(tmp_path / "curve.png")])
    assert refused.exit_code == 2 and "must end in .json" in refused.output
