"""privfl --version, privfl list, privfl init."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

import privfl
from privfl.algorithms.registry import available
from privfl.cli.main import app
from privfl.config import load_config
from privfl.data.errors import DatasetNotFoundError
from privfl.models import list_models

runner = CliRunner()


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith(f"privfl {privfl.__version__} ")


@pytest.mark.parametrize(("what", "expected"), [
    ("algorithms", list(available())),
    ("models", list_models()),
    ("accountants", ["rdp", "pld", "gdp-clt", "per-s1-convexity", "wcs", "ols", "theorem-4.1",
                     "cs", "contraction", "contraction-sharpened", "gdp"]),
    ("datasets", ["mnist-5k", "digits", "synthetic", "fashion-mnist", "mnist", "cifar10", "emnist",
                  "femnist", "shakespeare", "sent140", "flwr-datasets"]),
])
def test_list_names_what_a_config_accepts(what, expected):
    result = runner.invoke(app, ["list", what, "--json"])
    assert result.exit_code == 0, result.output
    items = json.loads(result.stdout)["items"]
    assert [item["name"] for item in items] == expected
    assert all(item["about"] for item in items)
    text = runner.invoke(app, ["list", what]).stdout.splitlines()
    assert [line.split()[0] for line in text] == expected


def test_list_refuses_an_unknown_catalogue():
    result = runner.invoke(app, ["list", "widgets"])
    assert result.exit_code == 2 and "widgets" in result.output


@pytest.mark.parametrize("algorithm", list(available()))
def test_init_writes_a_commented_config_that_validates_and_dry_runs(tmp_path, algorithm):
    path = tmp_path / f"{algorithm}.yaml"
    result = runner.invoke(app, ["init", "--algorithm", algorithm, "--out", str(path)])
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert text.startswith(f"# privfl starter configuration: {algorithm}")
    assert "  # " in text  # keys carry their descriptions
    config = load_config(path)
    assert config.federated.algorithm == algorithm and config.privacy.noise_multiplier >= 1.0
    assert f"#   privfl run {path} --dry-run" in text  # the header names the file written
    assert yaml.safe_load(text)["federated"]["algorithm"] == algorithm
    dry = runner.invoke(app, ["run", str(path), "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    payload = json.loads(dry.stdout)
    note = str(payload.get("note", ""))
    if "not found in" in note:  # the starter's optional data are absent: skipped, or failed
        raise DatasetNotFoundError(note)  # under PRIVFL_REQUIRE_DATA=1 (tests/conftest.py)
    assert payload["dry_run"] and payload["privacy"] and not (tmp_path / "runs").exists()
    assert payload["warnings"] == []  # every starter can learn, and its delta is not risky
    again = runner.invoke(app, ["init", "--algorithm", algorithm, "--out", str(path)])
    assert again.exit_code == 2 and "already exists" in again.stderr


def test_init_refuses_an_unknown_algorithm():
    result = runner.invoke(app, ["init", "--algorithm", "fedprox"])
    assert result.exit_code == 2 and "fedprox" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["run", "certify", "sweep"])
def test_help_shows_the_install_extra_intact(command):
    """Rich reads [ray] as markup and drops it unless escaped: the help must say privfl[ray]."""
    args = ["certify", "run", "--help"] if command == "certify" else [command, "--help"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "privfl[ray]" in result.output


def test_list_accountants_names_every_accountant_a_config_accepts():
    from privfl.algorithms.registry import config_class

    accepted = {name for algorithm in available()
                for name in config_class(algorithm).accountants()}
    result = runner.invoke(app, ["list", "accountants", "--json"])
    assert {item["name"] for item in json.loads(result.stdout)["items"]} == accepted


def test_list_without_an_argument_lists_all_four():
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0, result.output
    headings = [line for line in result.stdout.splitlines() if line.endswith(":")]
    assert headings == ["datasets:", "models:", "algorithms:", "accountants:"]
    payload = json.loads(runner.invoke(app, ["list", "--json"]).stdout)
    assert list(payload["items"]) == ["datasets", "models", "algorithms", "accountants"]
    assert [i["name"] for i in payload["items"]["algorithms"]] == list(available())


def test_no_two_models_share_a_description():
    items = json.loads(runner.invoke(app, ["list", "models", "--json"]).stdout)["items"]
    abouts = [item["about"] for item in items]
    assert len(set(abouts)) == len(abouts)
    assert any("num_classes = 62" in about for about in abouts)


@pytest.mark.parametrize("args", [["--help"], ["flower", "--help"]])
def test_help_shows_the_flower_extra_intact(args):
    """The same for [flower] in privfl's and privfl flower's help."""
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "privfl[flower]" in result.output
