"""Models the tuner knows by name, and the packaged text corpus of the CPU proof.

The corpus is Python's own documentation of its keywords and statements
(``pydoc_data.topics``, shipped inside every CPython install), so nothing is downloaded
at run time. The language model is a small GPT-style transformer written so torch.fx can
trace it and the shrinker can narrow it: sizes are read from tensors, never baked in, and
attention goes through ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

#: Characters of the corpus vocabulary; anything else reads as '?'.
VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))


def corpus_text() -> str:
    """Python's pydoc topics, concatenated in sorted key order (deterministic)."""
    from pydoc_data.topics import topics

    return "\n".join(topics[key] for key in sorted(topics))


def encode(text: str) -> torch.Tensor:
    index = {ch: i for i, ch in enumerate(VOCAB)}
    unknown = index["?"]
    return torch.tensor([index.get(ch, unknown) for ch in text], dtype=torch.long)


@dataclass(frozen=True)
class Corpus:
    """Train and validation token streams: the first 90% and the last 10% of the text."""

    train: torch.Tensor
    valid: torch.Tensor

    @classmethod
    def load(cls, max_chars: int | None = None) -> Corpus:
        tokens = encode(corpus_text()[:max_chars] if max_chars else corpus_text())
        cut = int(len(tokens) * 0.9)
        return cls(tokens[:cut], tokens[cut:])

    def batch(self, generator: torch.Generator, batch: int, context: int, split: str = "train"):
        """``batch`` random windows of ``context`` tokens and their next-token targets."""
        stream = self.train if split == "train" else self.valid
        starts = torch.randint(0, len(stream) - context - 1, (batch,), generator=generator)
        rows = torch.stack([stream[s:s + context + 1] for s in starts.tolist()])
        return rows[:, :-1], rows[:, 1:]


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a GELU MLP."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.size(0), x.size(1), x.size(2)
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        q = q.reshape(batch, length, self.heads, width // self.heads).transpose(1, 2)
        k = k.reshape(batch, length, self.heads, width // self.heads).transpose(1, 2)
        v = v.reshape(batch, length, self.heads, width // self.heads).transpose(1, 2)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(batch, length, width))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class TinyLM(nn.Module):
    """Character-level GPT: token and position embeddings, blocks, final norm, readout."""

    def __init__(self, width: int = 128, layers: int = 2, heads: int = 4, context: int = 64,
                 vocab: int = len(VOCAB)):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.size(1), device=idx.device)
        x = self.tokens(idx) + self.positions(positions)
        return self.head(self.norm(self.blocks(x)))


class TinyMLP(nn.Module):
    """A three-layer perceptron, for tests and quick demonstrations."""

    def __init__(self, inputs: int = 8, width: int = 32, outputs: int = 4):
        super().__init__()
        self.inp = nn.Linear(inputs, width)
        self.hidden = nn.Linear(width, width)
        self.out = nn.Linear(width, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(torch.relu(self.inp(x)))))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


@dataclass(frozen=True)
class TuneModel:
    """What the tuner needs to train one model: a builder, example inputs for tracing,
    a data source with ``batch(generator, batch_size, split)`` and a loss."""

    name: str
    build: Callable[[], nn.Module]
    example_inputs: Callable[[], tuple]
    data: Callable[[], Any]
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    description: str


@dataclass(frozen=True)
class LMData:
    """Windows of the packaged corpus for a model with ``context`` positions."""

    corpus: Corpus
    context: int

    def batch(self, generator: torch.Generator, batch: int, split: str = "train"):
        return self.corpus.batch(generator, batch, self.context, split)


def _lm_example() -> tuple:
    return (torch.zeros(2, 16, dtype=torch.long),)


MODELS: dict[str, TuneModel] = {
    "tiny-lm": TuneModel("tiny-lm", lambda: TinyLM(), _lm_example, lambda: LMData(Corpus.load(), 64), lm_loss,
                         "2-layer character transformer, width 128, 4 heads, context 64, on pydoc topics"),
    "tiny-lm-small": TuneModel("tiny-lm-small", lambda: TinyLM(width=64, context=32), _lm_example,
                               lambda: LMData(Corpus.load(max_chars=200_000), 32), lm_loss,
                               "2-layer character transformer, width 64, context 32 (quick runs and tests)"),
}
