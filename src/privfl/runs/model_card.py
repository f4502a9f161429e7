"""The privacy card's rows about where the model's starting point came from.

A guarantee protects the federated clients' data. Anything the starting model was computed
from before training, a pretrained state dict (``model.init_from``) or word vectors
(``model.embeddings``), is outside it: the released models are functions of that data too, so
the guarantee means what it says only if that data is public (Xie et al. 2023 pretrain on
CIFAR-100 and fine-tune on CIFAR-10; Li et al. 2018 use public GloVe vectors).
"""

from __future__ import annotations

from typing import Any

from privfl.config.schema import ModelConfig

__all__ = ["PRETRAINING_ROW", "model_card_rows"]

#: the card row's name
PRETRAINING_ROW = "pretraining data (not covered)"


def model_card_rows(model: ModelConfig, built: Any = None) -> dict[str, str]:
    """``{PRETRAINING_ROW: text}`` when the model starts from data outside the federation,
    else ``{}``. ``built``: the model the run trains, whose ``pretrained`` (the file's SHA-256)
    and ``glove`` (how many vocabulary words the file covered) are added when present."""
    sources = []
    if model.init_from is not None:
        head = " (output layer started fresh)" if model.replace_head else ""
        pretrained = getattr(built, "pretrained", None)
        digest = f", sha256 {pretrained.sha256[:16]}" if pretrained is not None else ""
        sources.append(f"initial model from {model.init_from}{digest}{head}")
    if model.embeddings is not None:
        frozen = model.freeze_embeddings is not False
        glove = getattr(built, "glove", None)
        coverage = (f", sha256 {glove.sha256[:16]}, {glove.found} of "
                    f"{glove.found + glove.missing} vocabulary words found"
                    if glove is not None else "")
        sources.append(f"word vectors from {model.embeddings} "
                       f"({'frozen' if frozen else 'then trained with DP'}{coverage})")
    if not sources:
        return {}
    return {PRETRAINING_ROW: "; ".join(sources) + ". The guarantee covers the federated "
            "clients' data only: it means what it says only if this pretraining data is "
            "public (it must not contain the clients' data)"}
