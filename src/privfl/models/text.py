"""Recurrent models for token sequences: Sent140 (Xie et al. 2023) and LEAF's Shakespeare.

Inputs are int64 token ids ``[N, T]`` (``0 = "<pad>"``, ``1 = "<unk>"``; the vocabulary comes
with the data, ``Dataset.vocabulary``). Both models are

    Embedding(V, E) -> LSTM(E -> H, L layers, batch first) -> h_T (last step) -> Linear(H -> K)

returning logits. Reading the last step's output follows LEAF's reference models (Caldas et al.
2018), whose sequences are padded at the end to a fixed length. Per-example gradients of the
Embedding and the LSTM are vectorised in the engine (:mod:`privfl.fl._capture_sequence`); a
frozen embedding (``freeze_embeddings=True``) is not a trainable parameter at all, so it is
neither clipped, noised nor released as an update.

* :class:`Xie2023Sent140LSTM`: Xie et al. 2023's Sent140 model, following Li et al. 2018
  (FedProx): 300-d GloVe embeddings, two LSTM layers of 256 units, binary output. Li et al.
  give no head size; privfl puts the Linear layer directly on ``h_T``.
* :class:`LeafShakespeareLSTM`: LEAF's Shakespeare reference model: 8-d embedding trained from
  scratch, two LSTM layers of 256 units, next-character logits over the vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from privfl._validation import check_int
from privfl.models.glove import GloveVectors, check_vocabulary, read_glove

__all__ = ["LeafShakespeareLSTM", "TextLSTM", "Xie2023Sent140LSTM"]


class TextLSTM(nn.Module):
    """Embedding -> LSTM -> last step -> Linear (see the module docstring).

    Parameters
    ----------
    vocabulary
        Words by token id (``vocabulary[0] == "<pad>"``, ``[1] == "<unk>"``); V = its length.
    input_shape
        ``(T,)``: the sequence length of the data.
    num_classes
        K, the number of outputs.
    embedding_dim, hidden, num_layers
        E, H and L.
    embeddings
        Path of a GloVe text file whose dimension is E (:func:`~privfl.models.glove.read_glove`;
        :attr:`glove` reports how many words it covered), or None (random ``N(0, 1)`` rows as
        ``nn.Embedding``; the pad row zero).
    freeze_embeddings
        Whether the embedding matrix stays fixed (no gradient, not part of any update).
    """

    output = "logits"

    def __init__(self, vocabulary: Sequence[str], input_shape: Sequence[int], num_classes: int,
                 *, embedding_dim: int, hidden: int = 256, num_layers: int = 2,
                 embeddings: str | None = None, freeze_embeddings: bool = False) -> None:
        super().__init__()
        self.vocabulary = check_vocabulary(vocabulary)
        shape = tuple(input_shape) if isinstance(input_shape, Sequence) else (input_shape,)
        if len(shape) != 1:
            raise ValueError(f"input_shape = {shape} is not allowed: a text model takes token "
                             "sequences of shape (seq_len,)")
        self.input_shape = (check_int("input_shape", shape[0], 1),)
        num_classes = check_int("num_classes", num_classes, 2)
        embedding_dim = check_int("embedding_dim", embedding_dim, 1)
        hidden = check_int("hidden", hidden, 1)
        num_layers = check_int("num_layers", num_layers, 1)
        if not isinstance(freeze_embeddings, bool):
            raise ValueError(f"freeze_embeddings = {freeze_embeddings!r} is not allowed: must "
                             "be true or false")
        self.embedding = nn.Embedding(len(self.vocabulary), embedding_dim, padding_idx=0)
        self.glove: GloveVectors | None = None
        if embeddings is not None:
            self.glove = read_glove(embeddings, self.vocabulary, embedding_dim)
            with torch.no_grad():
                self.embedding.weight.copy_(self.glove.matrix)
        self.embedding.weight.requires_grad_(not freeze_embeddings)
        self.lstm = nn.LSTM(embedding_dim, hidden, num_layers=num_layers, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.input_shape[0]:
            raise ValueError(f"input shape {tuple(x.shape)} is not allowed: "
                             f"{type(self).__name__} takes token ids [N, {self.input_shape[0]}]")
        out, _ = self.lstm(self.embedding(x))
        return self.fc(out[:, -1])


class Xie2023Sent140LSTM(TextLSTM):
    """Xie et al. 2023's Sent140 LSTM (after Li et al. 2018): E = 300 (GloVe), two layers of
    H = 256, two classes; embeddings frozen when read from GloVe (LEAF, Li et al. 2018) unless
    ``freeze_embeddings=False``. 1,098,242 trainable parameters with frozen embeddings."""

    def __init__(self, vocabulary: Sequence[str], input_shape: Sequence[int] = (25,),
                 num_classes: int = 2, *, embedding_dim: int = 300, hidden: int = 256,
                 num_layers: int = 2, embeddings: str | None = None,
                 freeze_embeddings: bool | None = None) -> None:
        freeze = embeddings is not None if freeze_embeddings is None else freeze_embeddings
        super().__init__(vocabulary, input_shape, num_classes, embedding_dim=embedding_dim,
                         hidden=hidden, num_layers=num_layers, embeddings=embeddings,
                         freeze_embeddings=freeze)


class LeafShakespeareLSTM(TextLSTM):
    """LEAF's Shakespeare character LSTM: E = 8, two layers of H = 256, one output per
    character of the vocabulary (``num_classes`` defaults to V; the target is the next
    character)."""

    def __init__(self, vocabulary: Sequence[str], input_shape: Sequence[int] = (80,),
                 num_classes: int | None = None, *, embedding_dim: int = 8, hidden: int = 256,
                 num_layers: int = 2, embeddings: str | None = None,
                 freeze_embeddings: bool = False) -> None:
        words = check_vocabulary(vocabulary)
        super().__init__(words, input_shape, len(words) if num_classes is None else num_classes,
                         embedding_dim=embedding_dim, hidden=hidden, num_layers=num_layers,
                         embeddings=embeddings, freeze_embeddings=freeze_embeddings)
