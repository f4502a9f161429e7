"""`privfl certify radius` from the command line: JSON and text output, bad inputs."""

import json

import pytest

from privfl.cli.main import main


def _invoke(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["certify", "radius", *args])
    out = capsys.readouterr()
    return exited.value.code, out.out, out.err


def _radius(top, runner_up, eps, delta, *extra):
    return ["--top", str(top), "--runner-up", str(runner_up), "--epsilon", str(eps),
            "--delta", str(delta), *extra]


@pytest.mark.parametrize(
    ("top", "runner", "eps", "delta", "k", "k_max", "attackers"),
    [
        (0.95, 0.05, 0.6298, 0.0029, 2.289528, 4.537444, 2),
        (0.6, 0.4, 0.6298, 0.0029, 0.319728, 4.537444, 0),
        (1.0, 0.0, 0.3593, 1e-5, 14.854403, 14.854403, 14),
    ],
)
def test_json(capsys, top, runner, eps, delta, k, k_max, attackers):
    code, out, err = _invoke(capsys, *_radius(top, runner, eps, delta, "--json"))
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["command"] == "certify radius"
    assert data["certified_k"] == pytest.approx(k, abs=5e-7)
    assert data["k_max"] == pytest.approx(k_max, abs=5e-7)
    assert data["max_attackers"] == attackers
    assert data["inputs"] == {"top": top, "runner_up": runner, "epsilon": eps, "delta": delta,
                              "unit": "user"}
    assert "Xie et al. 2023, Theorem 3" in data["theorem"] and data["kind"] == "bound"


def test_pure_dp_json_and_instance_level(capsys):
    code, out, _ = _invoke(capsys, *_radius(0.9, 0.0, 0.5, 0.0, "--json", "--unit", "instance"))
    data = json.loads(out)
    assert code == 0 and data["certified_k"] == "inf" and data["k_max"] == "inf"
    assert data["max_attackers"] is None and "Theorem 4" in data["theorem"]


def test_text(capsys):
    code, out, err = _invoke(capsys, *_radius(0.9, 0.1, 0.5, 0.0))
    assert code == 0 and err == ""
    assert "certified K = 2.19722" in out and "largest integer k certified = 2" in out
    assert "K_max = inf" in out and "Theorem 2 (one adversary): holds" in out
    code, out, _ = _invoke(capsys, *_radius(0.5, 0.5, 0.5, 0.001))
    assert "certified K = 0" in out and "none (K <= 0" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (_radius(1.5, 0.1, 0.5, 0.0), "top = 1.5 is out of range"),
        (_radius(0.9, -0.1, 0.5, 0.0), "runner_up = -0.1 is out of range"),
        (_radius(0.3, 0.6, 0.5, 0.0), "runner_up = 0.6 is out of range: must be <= top = 0.3"),
        (_radius(0.9, 0.1, 0.0, 0.0), "epsilon = 0.0 is out of range"),
        (_radius(0.9, 0.1, -2, 0.0), "epsilon = -2.0 is out of range"),
        (_radius(0.9, 0.1, 0.5, 1.0), "delta = 1.0 is out of range"),
        (_radius(0.9, 0.1, 0.5, -0.5), "delta = -0.5 is out of range"),
        (_radius(0.9, 0.1, "nan", 0.0), "epsilon = nan"),
        (_radius(0.9, 0.1, 0.5, 0.0, "--unit", "client"), "'client' is not one of"),
        (["--top", "0.9", "--epsilon", "1", "--delta", "0"], "--runner-up"),
    ],
)
def test_bad_inputs_exit_2_with_one_line(capsys, args, fragment):
    code, out, err = _invoke(capsys, *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == ""
    assert len(lines) == 1 and lines[0].startswith("privfl: error: "), err
    assert fragment in lines[0] and "Traceback" not in err
