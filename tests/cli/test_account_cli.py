"""`privfl account` and `privfl calibrate` from the command line."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from privfl.cli.main import app

runner = CliRunner()


def run_json(*args):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def flags(**options):
    """``--name value`` for each option, in order (a ``_`` in a name is ``-`` on the line)."""
    return [
        part for name, value in options.items() for part in ("--" + name.replace("_", "-"), value)
    ]


def dpsgd_options(sampling_rate, noise_multiplier, steps, delta="1e-5"):
    """The required options of ``privfl account dpsgd``."""
    return flags(
        sampling_rate=sampling_rate, noise_multiplier=noise_multiplier, steps=steps, delta=delta
    )


def seed2_rdp(sigma, orders):
    """seed 002's setting (q = 0.1, T = 3, delta = 0.0029) with RDP and the classic conversion."""
    return run_json(
        "account", "dpsgd", *dpsgd_options("0.1", sigma, "3", "0.0029"),
        *flags(method="rdp", orders=orders, conversion="classic"),
    )


def fedfdp_options(records, batch_size, local_steps, rounds, sigma):
    """The required options of ``privfl account fedfdp``, for 100 clients at delta = 1e-5."""
    return flags(
        records=records, batch_size=batch_size, local_steps=local_steps, rounds=rounds,
        paper_sigma=sigma, clients="100", delta="1e-5",
    )


def test_dpsgd_json_all_methods():
    data = run_json("account", "dpsgd", *dpsgd_options("0.01", "1.0", "1000"))
    methods = {r["method"]: r for r in data["results"]}
    assert set(methods) == {"rdp", "pld", "gdp-clt"}
    assert methods["gdp-clt"]["kind"] == "estimate" and "mu" in methods["gdp-clt"]
    assert methods["rdp"]["kind"] == "bound" and "order" in methods["rdp"]
    assert methods["pld"]["kind"] == "bound"
    for entry in data["results"]:
        assert entry["delta"] == 1e-5 and entry["unit"] == "record"


@pytest.mark.parametrize("sigma,expected", [(0.5, 6.9269), (1.8, 0.6298), (3.0, 0.2808)])
def test_dpsgd_legacy_classic_reproduces_seed2_table4(sigma, expected):
    data = seed2_rdp(str(sigma), "legacy")
    (result,) = data["results"]
    assert round(result["epsilon"], 4) == expected


def test_dpsgd_unit_client_reproduces_the_user_level_entry():
    """Xie et al. 2023's user-level entry (Table 4): clients sampled with rate q per round,
    each client's update clipped, z on the sum: the README's command prints unit client."""
    args = [
        "account", "dpsgd", *dpsgd_options("0.1", "1.8", "3", "0.0029"),
        *flags(method="rdp", orders="legacy", conversion="classic", unit="client"),
    ]
    data = run_json(*args)
    assert data["setting"]["unit"] == "client"
    assert data["setting"]["sampling"] == "poisson (q=0.1) of clients"
    (result,) = data["results"]
    assert round(result["epsilon"], 4) == 0.6298
    assert result["unit"] == "client" and result["sampling"] == "poisson (q=0.1) of clients"
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    card = {line.split()[0]: " ".join(line.split()[1:]) for line in text.output.splitlines()
            if line.split()}
    assert card["unit"] == "client" and card["sampling"] == "poisson (q=0.1) of clients"
    assert "0.629757" in text.output  # 0.6297564... rounded up (privfl.runs.rounding)


def test_dpsgd_unit_defaults_to_record():
    data = run_json("account", "dpsgd", *dpsgd_options("0.1", "1.8", "3"), *flags(method="rdp"))
    assert data["setting"]["unit"] == "record" and data["results"][0]["unit"] == "record"
    assert data["setting"]["sampling"] == "poisson (q=0.1)"
    bad = runner.invoke(app, ["account", "dpsgd", *dpsgd_options("0.1", "1", "3"),
                              "--unit", "user"])
    assert bad.exit_code == 2


def test_dpsgd_custom_orders():
    data = seed2_rdp("1.8", "2,13,40")
    assert data["results"][0]["order"] == 13


def test_fedfdp_json_reports_weak_and_strong():
    data = run_json("account", "fedfdp", *fedfdp_options("600", "16", "38", "93", "1.0"))
    entries = {(r["method"], r["scope"]): r for r in data["results"]}
    assert set(entries) == {
        ("gdp-clt", "weak"),
        ("gdp-clt", "strong"),
        ("pld", "weak"),
        ("pld", "strong"),
    }
    assert abs(entries["gdp-clt", "weak"]["mu"] - 2.71) <= 0.005
    assert entries["gdp-clt", "weak"]["kind"] == "estimate"
    assert entries["pld", "weak"]["kind"] == "bound"


# seed 000 Tables 1-3 (spec seed0 6.1): n, B, K, p, sigma, R, paper mu
SEED0_ROWS = [
    (600, 16, 38, 1.0, 1.0, 93, 2.71), (600, 16, 38, 1.0, 0.9, 83, 3.10),
    (600, 16, 38, 1.0, 0.75, 64, 3.96), (600, 16, 38, 0.5, 1.0, 194, 3.92),
    (600, 16, 38, 0.5, 0.9, 176, 4.51), (600, 16, 38, 0.5, 0.75, 127, 5.58),
    (600, 16, 38, 0.25, 1.0, 386, 5.52), (600, 16, 38, 0.25, 0.9, 325, 6.13),
    (600, 16, 38, 0.25, 0.75, 245, 7.75), (600, 8, 76, 0.5, 1.0, 266, 3.24),
    (600, 8, 76, 0.5, 0.9, 229, 3.64), (600, 8, 76, 0.5, 0.75, 191, 4.84),
    (500, 16, 32, 1.0, 1.0, 468, 6.70), (500, 16, 32, 1.0, 0.75, 321, 9.77),
    (500, 16, 32, 1.0, 0.5, 207, 26.81), (500, 16, 32, 0.5, 1.0, 904, 9.31),
    (500, 16, 32, 0.5, 0.75, 671, 14.13), (500, 16, 32, 0.5, 0.5, 405, 37.51),
]


@pytest.mark.parametrize("n,B,K,p,sigma,R,mu", SEED0_ROWS)
def test_fedfdp_cli_mu_rows(n, B, K, p, sigma, R, mu):
    data = run_json(
        "account", "fedfdp", *fedfdp_options(str(n), str(B), str(K), str(R), str(sigma)),
        *flags(client_rate=str(p), method="gdp-clt"),
    )
    weak = next(r for r in data["results"] if r["scope"] == "weak")
    assert abs(weak["mu"] - mu) <= 0.005


def test_fedfdp_help_states_convention():
    result = runner.invoke(app, ["account", "fedfdp", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--noise-multiplier z" in text and "--paper-sigma (sigma = z/2" in text
    assert "2*sigma*C" in text and "replace one record" in text


def test_calibrate_noise_and_steps():
    def calibrate(epsilon, **given):
        return run_json(
            "calibrate", "dpsgd", *flags(epsilon=epsilon, delta="1e-5", sampling_rate="0.01"),
            *flags(**given),
        )

    data = calibrate("1", steps="1000")
    assert data["calibration"]["parameter"] == "noise_multiplier"
    assert data["results"][0]["epsilon"] <= 1.0
    # the default is the tightest sound method, PLD
    assert data["calibration"]["method"] == "pld" and data["results"][0]["method"] == "pld"
    assert data["calibration"]["kind"] == "bound" and data["setting"]["kind"] == "bound"
    assert "warning" not in data and data["calibration"]["capped"] is False
    rdp = calibrate("1", steps="1000", method="rdp")
    assert rdp["calibration"]["value"] > data["calibration"]["value"]
    data = calibrate("2", noise_multiplier="1.0")
    assert data["calibration"]["parameter"] == "steps" and data["calibration"]["value"] > 0
    data = calibrate("2", noise_multiplier="1.0", steps="100")
    assert data["setting"]["epsilon_left"] > 0


def test_calibrate_warns_when_the_answer_is_the_search_cap():
    """`--epsilon 1e6` reports T = 1e9, the cap: a stderr line and a JSON `warning` say so."""
    args = ["calibrate", "dpsgd", *flags(epsilon="1e6", delta="1e-5", sampling_rate="0.01",
                                         noise_multiplier="1", method="rdp")]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calibration"]["value"] == 10**9 and data["calibration"]["capped"] is True
    assert "search cap" in data["warning"] and data["calibration"]["warning"] == data["warning"]
    assert result.stderr.startswith("privfl: warning: T = 1,000,000,000 is the search cap")
    assert len(result.stderr.strip().splitlines()) == 1
    text = runner.invoke(app, args)
    assert text.exit_code == 0 and "search cap" in text.stderr
    assert "warning: T = 1,000,000,000" in " ".join(text.stdout.split())
    solved = runner.invoke(app, ["calibrate", "dpsgd", *flags(
        epsilon="2", delta="1e-5", sampling_rate="0.01", noise_multiplier="1", method="rdp")])
    assert solved.exit_code == 0 and solved.stderr == ""


def test_calibrate_dpsgd_unit_client_and_help():
    data = run_json("calibrate", "dpsgd", *flags(epsilon="1", delta="0.0029", sampling_rate="0.1",
                                                 steps="3", unit="client"))
    assert data["setting"]["unit"] == "client" and data["results"][0]["unit"] == "client"
    assert data["setting"]["sampling"] == "poisson (q=0.1) of clients"
    help_text = " ".join(runner.invoke(app, ["calibrate", "dpsgd", "--help"]).output.split())
    assert "[default: pld]" in help_text and "search cap" in help_text


def test_calibrate_fedfdp_mu_is_labelled_an_estimate():
    data = run_json(
        "calibrate", "fedfdp", *flags(records="600", batch_size="16", local_steps="38",
                                      rounds="100", mu="3"),
    )
    assert data["calibration"] == {"method": "gdp-clt", "kind": "estimate"}
    assert data["setting"]["kind"].startswith("estimate")


def test_human_table_mentions_bound_and_estimate():
    result = runner.invoke(app, ["account", "dpsgd", *dpsgd_options("0.01", "1.0", "100")])
    assert result.exit_code == 0
    assert "bound" in result.output and "estimate" in result.output


# valid `account dpsgd` options; each bad-input case below replaces one of them
VALID_DPSGD = {"sampling_rate": "0.1", "noise_multiplier": "1", "steps": "10", "delta": "1e-5"}


@pytest.mark.parametrize(
    "name,value",
    [
        ("sampling_rate", "1.5"),
        ("noise_multiplier", "0"),
        ("noise_multiplier", "nan"),
        ("steps", "-3"),
        ("delta", "2"),
    ],
)
def test_bad_input_exits_nonzero_with_message(name, value):
    args = dpsgd_options(**{**VALID_DPSGD, name: value})
    result = runner.invoke(app, ["account", "dpsgd", *args])
    assert result.exit_code == 2
    assert name in result.stderr and "must be" in result.stderr
    assert "Traceback" not in result.output


def test_no_traceback_in_real_process():
    proc = subprocess.run(
        [
            sys.executable, "-m", "privfl.cli.main", "account", "dpsgd",
            *dpsgd_options(**{**VALID_DPSGD, "noise_multiplier": "-1"}),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "noise_multiplier" in proc.stderr and "Traceback" not in proc.stderr


def last_iterate_options(batch_size):
    """The required options of ``privfl account last-iterate``: n = 100, L = rho = 1, eta = 0.5,
    sigma = 1.5, delta = 1e-5."""
    return flags(
        users="100", batch_size=batch_size, lipschitz="1", radius="1", lr="0.5", noise="1.5",
        delta="1e-5",
    )


@pytest.mark.parametrize("m,expected", [(10, 1.6485), (20, 1.1241)])
def test_last_iterate_figure2(m, expected):
    data = run_json(
        "account", "last-iterate", *last_iterate_options(str(m)),
        "--convex", "--smoothness", "4",  # Figure 2 uses the convex diameter 2 rho (eta = 2/beta)
    )
    methods = [r["method"] for r in data["results"]]
    assert methods == ["contraction", "contraction-sharpened", "rdp", "pld"]
    contraction = data["results"][0]
    assert round(contraction["epsilon"], 4) == expected
    assert contraction["kind"] == "bound" and contraction["neighbouring"] == "replace-one"
    assert all(r["delta"] == 1e-5 for r in data["results"])


def test_last_iterate_refuses_m_not_dividing_n():
    result = runner.invoke(app, ["account", "last-iterate", *last_iterate_options("30")])
    assert result.exit_code == 2 and "batch_size" in result.stderr
