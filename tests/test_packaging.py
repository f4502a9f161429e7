"""pyproject.toml's metadata builds without setuptools' deprecation banner: the license is an
SPDX expression (PEP 639), not the deprecated ``{ text = ... }`` table that printed a banner
during every install."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_is_an_spdx_expression_and_the_build_needs_a_setuptools_that_reads_it():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in project["build-system"]["requires"]  # PEP 639 support


def test_metadata_builds_without_a_license_warning(tmp_path):
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "src" / "privfl").mkdir(parents=True)
    (tmp_path / "src" / "privfl" / "__init__.py").write_text("")
    (tmp_path / "meta").mkdir()
    code = ("import warnings, setuptools.build_meta as b\n"
            "warnings.simplefilter('always')\n"
            "print(b.prepare_metadata_for_build_wheel('meta'))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "license" not in done.stderr.lower(), done.stderr
    metadata = (tmp_path / "meta" / done.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()


def test_report_html_data_files_are_package_data():
    """The template and the vendored plotly.js (with its licence) that report.html needs are
    installed: each file beside privfl.runs' modules matches a package-data pattern."""
    tomllib = pytest.importorskip("tomllib")
    from pathlib import PurePosixPath

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["privfl.runs"]
    package = ROOT / "src" / "privfl" / "runs"
    files = [p.relative_to(package).as_posix() for folder in ("templates", "vendor")
             for p in (package / folder).iterdir() if p.is_file()]
    assert {"templates/report.html.j2", "vendor/plotly-basic.min.js", "vendor/LICENSE"} <= set(
        files)
    unmatched = [f for f in files if not any(PurePosixPath(f).match(p) for p in patterns)]
    assert unmatched == []
