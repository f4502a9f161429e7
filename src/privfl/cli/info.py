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

from privfl.cli.common import JsonOpt, runnable, user_errors

__all__ = ["init_command", "list_command", "starter_config", "version_callback"]

class Catalogue(str, Enum):
    datasets = "datasets"
    models = "models"
    algorithms = "algorithms"
    accountants = "accountants"


def version_callback(value: bool) -> None:
    """``--version``: print privfl's and torch's versions, then exit (torch's from its
    installed metadata: the command does not import torch)."""
    if value:
        import platform
        from importlib.metadata import PackageNotFoundError, version

        from privfl import __version__

        try:  # the installed distribution's version: importing torch takes seconds
            torch_version = version("torch")
        except PackageNotFoundError:
            torch_version = "not installed"
        typer.echo(f"privfl {__version__} (torch {torch_version}, python "
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
        from privfl.config.datasets import dataset_entry, dataset_names

        return [{"name": n, "source": dataset_entry(n).source, "about": dataset_entry(n).about}
                for n in dataset_names()]
    if what is Catalogue.models:  # torch-free: the lines privfl.config.model_names holds
        from privfl.config.model_names import BUILTIN_MODEL_ABOUT, model_names

        return [{"name": n, "about": BUILTIN_MODEL_ABOUT.get(n, "registered at run time")}
                for n in model_names()]
    if what is Catalogue.algorithms:  # torch-free: the names and lines the registry holds
        from privfl.config.algorithms import register_builtin_algorithms
        from privfl.config.sections import algorithm_about, registered_algorithms

        register_builtin_algorithms()
        return [{"name": n, "about": algorithm_about(n)} for n in registered_algorithms()]
    from privfl.accounting.registry import methods

    return [{"name": n, "about": m.describe()} for n, m in methods().items()]


@user_errors
def list_command(
    what: Annotated[Catalogue | None, typer.Argument(
        help="What to list (default: all four).", show_default=False)] = None,
    json_output: JsonOpt = False,
) -> None:
    """List the datasets, models, algorithms or accountants a configuration can name."""
    if what is None:
        if json_output:
            from privfl.cli.output import print_json

            print_json({"command": "list", "what": "all",
                        "items": {c.value: _catalogue(c) for c in Catalogue}})
            return
        for index, catalogue in enumerate(Catalogue):
            typer.echo(("\n" if index else "") + f"{catalogue.value}:")
            _echo_rows(_catalogue(catalogue), indent="  ")
        return
    rows = _catalogue(what)
    if json_output:
        from privfl.cli.output import print_json

        print_json({"command": "list", "what": what.value, "items": rows})
        return
    _echo_rows(rows)


def _echo_rows(rows: list[dict[str, str]], indent: str = "") -> None:
    width = max(len(r["name"]) for r in rows)
    for row in rows:
        extra = f" [{row['source']}]" if "source" in row else ""
        typer.echo(f"{indent}{row['name']:{width}s}  {row['about']}{extra}")


_MLP_100 = {"name": "mlp", "kwargs": {"hidden": [100]}}

#: settings a starter needs beyond the schema's defaults to be valid and to learn as written on
#: its built-in data (the shipped demos' settings, configs/demo-*.yaml; the schema's defaults
#: are PriFedSync's); tests/cli/test_starters.py runs each one
#: DP-FTRL's and BandMF's starters (their demos' data and local training)
_CORRELATED_DATA = {"dataset": "fashion-mnist", "partition": "iid", "clients": 2000,
                    "train_size": 20, "test_size": 2}
_CORRELATED_TRAINING = {"local_steps": 5, "batch_size": 10, "sampling": "without-replacement",
                        "optimizer": "sgd", "lr": 0.05}
STARTER_SETTINGS: dict[str, dict[str, Any]] = {
    # client level: E[m] = 0.3 * 100 = 30 clients per round for z = 1.5 (20 clients at the
    # default rate 0.1 gave E[m] = 2, which cannot learn); delta < 0.1 / 100 clients
    "dp-fedavg": {
        "data": {"dataset": "digits", "partition": "iid", "clients": 100, "test_size": 3},
        "model": {"name": "logreg"},
        "training": {"local_steps": 5, "batch_size": 7, "optimizer": "sgd", "lr": 0.1},
        "privacy": {"noise_multiplier": 1.5, "delta": 1e-4},
        "federated": {"rounds": 40, "client_rate": 0.3, "adaptive_clipping": True},
    },
    "insdp-fedsgd": {
        "data": {"partition": "iid", "clients": 20, "train_size": 200, "test_size": 50},
        "model": _MLP_100,
        "training": {"local_steps": 1, "batch_size": 50, "sampling": "poisson",
                     "optimizer": "sgd", "lr": 0.5},
        "federated": {"rounds": 60, "clients_per_round": 10, "release": "global-model"},
    },
    "insdp-fedavg": {
        "data": {"partition": "iid", "clients": 10, "train_size": 400, "test_size": 100},
        "model": _MLP_100,
        "training": {"local_steps": 8, "batch_size": 50, "sampling": "poisson",
                     "optimizer": "momentum", "lr": 0.05, "weight_decay": 0.0005},
        "federated": {"rounds": 10},
    },
    "dp-dsgd": {
        "data": {"partition": "iid", "clients": 40, "train_size": 100, "test_size": 25},
        "model": _MLP_100,
        "federated": {"rounds": 60, "client_rate": 0.5, "record_rate": 0.1, "server_lr": 0.1,
                      "server_momentum": 0.9},
    },
    # no sampling: 2,000 Fashion-MNIST clients in 40 groups of 50 (one participation each);
    # z calibrated to epsilon 2 at delta 1e-5 (configs/demo-dp-ftrl.yaml)
    "dp-ftrl": {
        "data": _CORRELATED_DATA, "model": {"name": "logreg"}, "training": _CORRELATED_TRAINING,
        "privacy": {"noise_multiplier": 4.883823134642171, "delta": 1e-5},
        "federated": {"rounds": 40, "min_separation": 40},
    },
    # 10 groups of 200, band 10: each client 4 times, 10 rounds apart (configs/demo-bandmf.yaml)
    "bandmf-fedavg": {
        "data": _CORRELATED_DATA, "model": {"name": "logreg"}, "training": _CORRELATED_TRAINING,
        "privacy": {"noise_multiplier": 3.987624891291062, "delta": 1e-5},
        "federated": {"rounds": 40, "band": 10, "min_separation": 10, "server_lr": 0.1},
    },
    # one pass over 1,400 single-record users, 280 per round (Asoodeh et al. 2021's setting)
    "projected-sgd": {
        "data": {"dataset": "digits", "partition": "iid", "clients": 1400, "train_size": 1,
                 "test_size": 0},
        "model": {"name": "logreg"},
        "privacy": {"noise_multiplier": 2.0, "clip_norm": 2.0},
        "federated": {"rounds": 5, "users_per_round": 280, "radius": 0.05, "lr": 2.0,
                      "convex": True, "smoothness": 1.0, "lipschitz": 2.0,
                      "input_bound": 1.0},
    },
}


def starter_config(algorithm: str, filename: str | None = None) -> str:
    """A commented YAML configuration for ``algorithm``: every key with its default and its
    description from the schema. ``privacy.noise_multiplier: 1.0`` is set (a private run needs
    a noise setting) and :data:`STARTER_SETTINGS`; the result validates as written and learns
    on its built-in data. ``filename``: the file it is written to (named in its header)."""
    from pydantic import BaseModel

    from privfl.config import config_from_dict, dump_config
    from privfl.config.algorithms import register_builtin_algorithms
    from privfl.config.sections import algorithm_about, registered_algorithms

    register_builtin_algorithms()  # torch-free: the names and lines the registry holds
    if algorithm not in registered_algorithms():
        raise ValueError(f"algorithm = {algorithm!r} is not allowed: must be one of "
                         f"{', '.join(registered_algorithms())}")
    title = algorithm_about(algorithm)
    extra = STARTER_SETTINGS.get(algorithm, {})
    config = config_from_dict({
        **{key: value for key, value in extra.items() if key not in ("privacy", "federated")},
        "name": f"my-{algorithm}",
        "privacy": {"noise_multiplier": 1.0, **extra.get("privacy", {})},
        "federated": {"algorithm": algorithm, **extra.get("federated", {})},
    })
    where = filename or f"{algorithm}.yaml"
    lines = [f"# privfl starter configuration: {algorithm} ({title})",
             "# Every key with its default; delete what you do not change. Run it with",
             f"#   privfl run {where} --dry-run   (the planned privacy, no training)",
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
    text = starter_config(algorithm, None if out is None else str(out))
    if out is None:
        typer.echo(text, nl=False)
        return
    if out.exists():
        raise ValueError(f"out = {str(out)!r} already exists: choose another file")
    out.write_text(text, encoding="utf-8")
    typer.echo(runnable(f"wrote {out}: edit it, then privfl run {out} --dry-run"))
