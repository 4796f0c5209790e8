"""Streaming LSTM transducer: causal encoder, stateless decoder, joiner.

Shape legend: N batch, T input frames (10 ms), T' = encoder frames (40 ms),
F = 80 fbank bins, D = d_model (the residual width), H = rnn_hidden_size (the LSTMs' cells and
outputs; = D unless widened, then each LSTM's output is projected H -> D), L = LSTM layers,
U = target length,
E = decoder embedding dim, J = joiner dim, V = vocab size (blank = 0).

The encoder is causal: two k=3, s=2 convolutions without time padding (encoder frame
j sees input frames 4j .. 4j+6) followed by unidirectional LSTMs. Encoding a stream
in chunks of T = 35 frames that advance by 32 therefore gives exactly the
whole-utterance output, which is what training computes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["ModelConfig", "Subsampling", "ResidualLSTM", "Encoder", "Decoder", "Joiner", "Transducer", "encoder_frames"]


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int  # characters + blank
    num_phones: int = 0  # auxiliary phoneme CTC head (0: none); blank 0 included
    num_features: int = 80
    d_model: int = 288  # residual width: subsampling output, LSTM input, heads' input
    rnn_hidden_size: int = 0  # LSTM cells and outputs (0: d_model, no projection)
    num_layers: int = 4
    phone_layer: int = 2  # phoneme CTC reads the output of this many layers
    conv_channels: int = 32
    decoder_dim: int = 256
    joiner_dim: int = 256
    context_size: int = 2
    dropout: float = 0.1
    simple_heads: bool = False  # the pruned loss's am / lm heads to the vocabulary (training only)

    @property
    def hidden(self) -> int:
        return self.rnn_hidden_size or self.d_model

    def to_dict(self) -> dict:
        return asdict(self)


def encoder_frames(num_frames: Tensor | int):
    """T' for T input frames: two valid k=3, s=2 convolutions."""
    return ((num_frames - 3) // 2 + 1 - 3) // 2 + 1


class Subsampling(nn.Module):
    """(N, T, F) -> (N, T', D); no time padding, so it is chunk-invariant."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        c = cfg.conv_channels
        self.conv1 = nn.Conv2d(1, c, 3, stride=2)
        self.conv2 = nn.Conv2d(c, c, 3, stride=2)
        freq = ((cfg.num_features - 3) // 2 + 1 - 3) // 2 + 1
        self.out = nn.Linear(c * freq, cfg.d_model)

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.conv1(x.unsqueeze(1)))
        x = F.relu(self.conv2(x))  # (N, C, T', F')
        n, c, t, f = x.shape
        return self.out(x.permute(0, 2, 1, 3).reshape(n, t, c * f))


class ResidualLSTM(nn.Module):
    """x + proj(LSTM(x)), then LayerNorm; proj is H -> D where H > D, else nothing.
    forward(x (N, T', D), h (1, N, H), c (1, N, H)) -> x, h, c."""

    def __init__(self, d_model: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.lstm = nn.LSTM(d_model, hidden, batch_first=True)
        self.proj = nn.Linear(hidden, d_model) if hidden != d_model else nn.Identity()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        y, (h, c) = self.lstm(x, (h, c))
        return self.norm(x + self.dropout(self.proj(y))), h, c


class Encoder(nn.Module):
    """Fixed input normalisation, subsampling, L residual LSTM layers.

    forward(x (N, T, F), state0 (L, N, H), state1 (L, N, H))
      -> out (N, T', D), phone_hidden (N, T', D), next state0, next state1
    state0 holds the LSTM outputs h, state1 the cells c.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.num_layers = cfg.num_layers
        self.hidden = cfg.hidden
        self.phone_layer = cfg.phone_layer
        self.register_buffer("feat_mean", torch.zeros(cfg.num_features))
        self.register_buffer("feat_inv_std", torch.ones(cfg.num_features))
        self.subsampling = Subsampling(cfg)
        self.layers = nn.ModuleList(ResidualLSTM(cfg.d_model, cfg.hidden, cfg.dropout)
                                    for _ in range(cfg.num_layers))

    def init_states(self, batch: int) -> tuple[Tensor, Tensor]:
        z = torch.zeros(self.num_layers, batch, self.hidden)
        return z, z.clone()

    def forward(self, x: Tensor, state0: Tensor, state1: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        x = self.subsampling((x - self.feat_mean) * self.feat_inv_std)
        hs: list[Tensor] = []
        cs: list[Tensor] = []
        mid = x
        for i, layer in enumerate(self.layers):
            x, h, c = layer(x, state0[i:i + 1], state1[i:i + 1])
            hs.append(h)
            cs.append(c)
            if i + 1 == self.phone_layer:
                mid = x
        return x, mid, torch.cat(hs, 0), torch.cat(cs, 0)


class Decoder(nn.Module):
    """Stateless prediction network: embedding + 1-D conv over the last context_size tokens.

    forward(y (N, U), pad) -> (N, U, E). Negative ids map to a zero embedding.
    pad=True (training): left-pads context_size - 1 zero embeddings, so output u
    depends on y[u-1], y[u]; pad=False (inference, U = context_size): one output."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.context_size = cfg.context_size
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.decoder_dim)
        self.conv = nn.Conv1d(cfg.decoder_dim, cfg.decoder_dim, cfg.context_size,
                              groups=cfg.decoder_dim // 4, bias=False)

    def forward(self, y: Tensor, pad: bool) -> Tensor:
        emb = self.embedding(y.clamp(min=0)) * (y >= 0).unsqueeze(-1).to(torch.float32)
        emb = emb.permute(0, 2, 1)  # (N, E, U)
        if pad:
            emb = F.pad(emb, (self.context_size - 1, 0))
        return F.relu(self.conv(emb)).permute(0, 2, 1)


class Joiner(nn.Module):
    """logit = output_linear(tanh(encoder_proj(enc) + decoder_proj(dec)));
    the projections are applied by the encoder/decoder exports."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.encoder_proj = nn.Linear(cfg.d_model, cfg.joiner_dim)
        self.decoder_proj = nn.Linear(cfg.decoder_dim, cfg.joiner_dim)
        self.output_linear = nn.Linear(cfg.joiner_dim, cfg.vocab_size)

    def forward(self, enc_proj: Tensor, dec_proj: Tensor) -> Tensor:
        return self.output_linear(torch.tanh(enc_proj + dec_proj))


class Transducer(nn.Module):
    """Encoder + decoder + joiner + auxiliary CTC heads (char on the top layer,
    phonemes on layer ``phone_layer``)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        self.joiner = Joiner(cfg)
        self.ctc_head = nn.Linear(cfg.d_model, cfg.vocab_size)
        self.phone_head = nn.Linear(cfg.d_model, cfg.num_phones) if cfg.num_phones else None
        if cfg.simple_heads:  # registered last: an optimizer state saved without them still lines up
            self.simple_am_head = nn.Linear(cfg.d_model, cfg.vocab_size)
            self.simple_lm_head = nn.Linear(cfg.decoder_dim, cfg.vocab_size)

    def encode(self, feats: Tensor, feat_lens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Whole utterances from zero states: (N, T, F) -> out (N, T', D), mid (N, T', D), lens (N,)."""
        s0, s1 = self.encoder.init_states(feats.size(0))
        out, mid, _, _ = self.encoder(feats, s0.to(feats), s1.to(feats))
        return out, mid, encoder_frames(feat_lens)

    def decode_targets(self, targets: Tensor) -> Tensor:
        """targets (N, U) padded with 0 -> decoder output (N, U+1, E) after blank, y1 .. yU."""
        blank = torch.zeros_like(targets[:, :1])
        return self.decoder(torch.cat([blank, targets], 1), pad=True)

    def lattice_logits(self, enc: Tensor, targets: Tensor) -> Tensor:
        """enc (N, T', D), targets (N, U) padded with 0 -> logits (N, T', U+1, V)."""
        return self.joint_lattice(enc, self.decode_targets(targets))

    def joint_lattice(self, enc: Tensor, dec: Tensor) -> Tensor:
        """The joiner on every (frame, target position): enc (N, T', D), decoder output
        dec (N, U+1, E) -> logits (N, T', U+1, V)."""
        e = self.joiner.encoder_proj(enc).unsqueeze(2)
        return self.joiner(e, self.joiner.decoder_proj(dec).unsqueeze(1))
