"""``privfl run`` configurations: a pydantic schema, YAML loading, ``--set`` overrides.

>>> from privfl.config import load_config
>>> config = load_config("configs/demo.yaml", ["federated.rounds=5"])  # doctest: +SKIP
>>> config.federated.rounds  # doctest: +SKIP
5
"""

from privfl.config.loader import (
    DEMO_CONFIG,
    ConfigError,
    apply_overrides,
    config_from_dict,
    dump_config,
    format_validation_error,
    load_config,
    parse_override,
    read_yaml,
)
from privfl.config.schema import (
    DATASET_NAMES,
    DataConfig,
    ExperimentConfig,
    FederatedConfig,
    ModelConfig,
    PrivacyConfig,
    RunConfig,
    StopConfig,
    TrainingConfig,
)

__all__ = [
    "DATASET_NAMES",
    "DEMO_CONFIG",
    "ConfigError",
    "DataConfig",
    "ExperimentConfig",
    "FederatedConfig",
    "ModelConfig",
    "PrivacyConfig",
    "RunConfig",
    "StopConfig",
    "TrainingConfig",
    "apply_overrides",
    "config_from_dict",
    "dump_config",
    "format_validation_error",
    "load_config",
    "parse_override",
    "read_yaml",
]
