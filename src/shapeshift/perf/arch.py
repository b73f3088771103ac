"""Architecture facts of the models the performance model knows.

The analytic model needs a handful of size figures per model (parameters, hidden size,
layers, heads, sequence length) and the job's global batch. They are kept in code so the
product runs without the shared data directory.

Source: the seven entries are copied from ``rubick/models.csv`` of the Rubick/Morphling
artifact (Apache-2.0), where ``local_batch`` is the *global* batch of every measured run
(strong scaling; see the data notes). Two extra trace directories reuse them:
``llama7b_bsz16`` is llama7 at global batch 16, and ``t5_3B`` uses the public T5-3B
configuration (d_model 1024, 24 encoder + 24 decoder layers, 32 heads); its sequence
length and batch are not published with the trace and are assumed equal to t5's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


class UnknownModelError(KeyError):
    """A model name that is not in the built-in catalog."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown model"


@dataclass(frozen=True, slots=True)
class ModelArch:
    """Size figures of one model plus the global batch its jobs train with.

    ``global_batch`` belongs to the job rather than the architecture, but every trace
    fixes it per model, so the catalog carries the measured value as the default.
    """

    name: str
    params: float
    hidden: int
    layers: int
    heads: int
    seq_len: int
    global_batch: int

    def __post_init__(self) -> None:
        if self.params <= 0 or min(self.hidden, self.layers, self.heads, self.seq_len, self.global_batch) < 1:
            raise ValueError(f"model {self.name!r}: sizes must be positive")

    @property
    def params_b(self) -> float:
        """Parameters in billions: the unit of the k_opt coefficients."""
        return self.params / 1e9

    def with_batch(self, global_batch: int) -> ModelArch:
        return replace(self, global_batch=int(global_batch))


_CATALOG: dict[str, ModelArch] = {
    a.name: a
    for a in (
        ModelArch("vit", 86e6, 768, 12, 12, 1024, 64),
        ModelArch("roberta", 355e6, 1024, 24, 16, 1024, 64),
        ModelArch("bert", 336e6, 1536, 24, 16, 1024, 32),
        ModelArch("t5", 1.2e9, 1280, 16, 16, 768, 16),
        ModelArch("gpt2", 1.5e9, 1920, 24, 19, 1024, 16),
        ModelArch("llama7", 7e9, 4096, 32, 32, 2048, 8),
        ModelArch("llama30", 30e9, 6656, 60, 52, 2048, 4),
        ModelArch("llama7b_bsz16", 7e9, 4096, 32, 32, 2048, 16),
        ModelArch("t5_3B", 2.85e9, 1024, 48, 32, 768, 16),
    )
}

_ALIASES = {"llama7b": "llama7", "llama30b": "llama30", "llama-7b": "llama7", "llama-30b": "llama30"}


def known_models() -> tuple[str, ...]:
    return tuple(_CATALOG)


def get_arch(name: str) -> ModelArch:
    """Look a model up by name (case-insensitive, a few aliases); raise with the known names."""
    key = name.strip()
    for candidate in (key, key.lower(), _ALIASES.get(key.lower(), "")):
        if candidate in _CATALOG:
            return _CATALOG[candidate]
    raise UnknownModelError(f"unknown model {name!r}; known models: {', '.join(_CATALOG)}")
