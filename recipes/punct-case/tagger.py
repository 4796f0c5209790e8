"""The punctuation and casing tagger: word embedding, two bidirectional GRU layers and
two linear heads (punctuation after the word; casing of the word).

Shapes: ``ids`` (B, T) int64 word ids (0 padding, 1 unknown) -> ``punct`` (B, T, 4) and
``case`` (B, T, 3) logits.
"""

from __future__ import annotations

import torch
from torch import nn

PAD, UNK = 0, 1


class Tagger(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 64, hidden: int = 96, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=PAD)
        self.rnn = nn.GRU(dim, hidden, num_layers=layers, batch_first=True,
                          bidirectional=True, dropout=0.1)
        self.punct = nn.Linear(2 * hidden, 4)
        self.case = nn.Linear(2 * hidden, 3)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, _ = self.rnn(self.embed(ids))
        return self.punct(x), self.case(x)
