"""Refuse a ``training`` section that an algorithm does not read (DP-DSGD and projected noisy
SGD set their server step in ``federated``; a changed ``training`` key would be silently
ignored)."""

from __future__ import annotations

from privfl.config.schema import ExperimentConfig, TrainingConfig

__all__ = ["refuse_training_section"]


def refuse_training_section(config: ExperimentConfig, algorithm: str, why: str,
                            instead: str) -> None:
    """ValueError naming the first ``training`` key that differs from its default:
    ``training.KEY = VALUE is not used by federated.algorithm = ALGORITHM (WHY): remove the
    training section; set INSTEAD instead``."""
    default = TrainingConfig()
    changed = [name for name in TrainingConfig.model_fields
               if getattr(config.training, name) != getattr(default, name)]
    if changed:
        raise ValueError(
            f"training.{changed[0]} = {getattr(config.training, changed[0])!r} is not used by "
            f"federated.algorithm = {algorithm!r} ({why}): remove the training section; set "
            f"{instead} instead"
        )
