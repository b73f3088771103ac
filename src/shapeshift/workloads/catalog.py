"""The model catalog: what schedulers need to know about a model by its name.

Policies ask three questions about a job's model that a trace rarely answers: is it
sensitive to how its GPUs are spread over nodes (Tiresias consolidates only those), how
fast is it on each GPU type relative to the others (Gavel), and how does its throughput
scale with the GPU count (Optimus and other elastic policies). The catalog is built in
(no network, no files) so runs are reproducible and work without ``../shared``.

Sources, per figure (``ModelInfo.source``):

* the seven transformer models of the Rubick study (vit, roberta, bert, t5, gpt2,
  llama7, llama30): parameters, hidden size, layers, heads, sequence length and per-GPU
  batch copied from the Rubick/Morphling artifact's ``models.csv`` (Apache-2.0),
  measured on A800 GPUs. That artifact has no K80/P100/V100 figures, so these models
  carry no per-type speed (every type counts as the reference); their scaling
  efficiencies are approximate, after the Rubick paper's placement measurements
  (large models lose more to inter-node communication);
* the CNN / RNN / recommendation models of the Tiresias, Gavel and Blox studies: the
  placement-sensitivity flag follows Tiresias (Gu et al., NSDI 2019, §3.3: models with
  large, skewed tensors such as VGG and AlexNet are sensitive to consolidation, ResNet
  and Inception much less); relative throughput on K80/P100/V100 is Gavel's measured
  isolated 1-GPU throughput at the catalog's batch size for the models Gavel measured
  (ResNet-18 at 128, ResNet-50 at 64, Transformer at 64, LM at 20, Recommendation at
  512, A3C, CycleGAN; ``scheduler/simulation_throughputs.json`` of
  stanford-futuredata/gavel; Gavel's ratios also move with batch size and GPU count,
  which one ratio per model cannot hold) and approximate, after Gavel Fig. 1, for the
  others, normalised to K80 = 1; scaling efficiencies are approximate, after Optimus (Peng et al., EuroSys
  2018, Fig. 3) and the Tiresias placement study. Estimated figures say so;
* how much slower a model runs with its GPUs spread over servers: Gavel's measured
  consolidated vs unconsolidated throughputs, or a stated proxy
  (``placement_figures``).

Scaling model: ``speedup(g) = g * scaling_efficiency ** log2(g)``, i.e. every doubling of
the GPU count keeps ``scaling_efficiency`` of the ideal gain (1.0 = linear).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from shapeshift.errors import InputError
from shapeshift.workloads import placement_figures

#: GPU types the per-type speed figures cover (as in Gavel).
GPU_TYPES: tuple[str, ...] = ("K80", "P100", "V100")

RUBICK_SOURCE = "Rubick/Morphling artifact models.csv (A800 measurements, Apache-2.0)"
GAVEL_SPEED = "approximate, after Gavel (Narayanan et al., OSDI 2020), Fig. 1, K80 = 1"
GAVEL_MEASURED = (
    "Gavel's measured isolated 1-GPU throughputs at this batch size "
    "(stanford-futuredata/gavel scheduler/simulation_throughputs.json), K80 = 1"
)
TIRESIAS_FLAG = "after Tiresias (Gu et al., NSDI 2019), placement-sensitivity study"
TENSOR_SKEW = "largest tensor / model size from the tensor lists in SymbioticLab/Tiresias simulator/models.py"
OPTIMUS_SCALING = "approximate, after Optimus (Peng et al., EuroSys 2018), Fig. 3"
RUBICK_SCALING = "approximate, after Rubick (placement measurements on A800 nodes)"


@dataclass(frozen=True)
class ModelInfo:
    """What the catalog knows about one model. ``None`` means unknown."""

    name: str
    family: str
    #: Tiresias: consolidate this model's GPUs on as few nodes as possible.
    placement_sensitive: bool
    #: Default per-GPU (local) batch size.
    batch_size: int
    params: float | None = None
    hidden_size: int | None = None
    num_layers: int | None = None
    num_heads: int | None = None
    seq_len: int | None = None
    dataset: str = ""
    #: Throughput on each GPU type relative to K80 (empty when unknown).
    gpu_speed: Mapping[str, float] = field(default_factory=dict)
    #: Fraction of the ideal gain kept per doubling of the GPU count (1.0 = linear).
    scaling_efficiency: float | None = None
    #: Where each kind of figure comes from.
    source: Mapping[str, str] = field(default_factory=dict)
    #: Tiresias's profiler input: largest tensor / total model size (``None`` = not profiled).
    tensor_skew: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_speed", MappingProxyType(dict(self.gpu_speed)))
        object.__setattr__(self, "source", MappingProxyType(dict(self.source)))
        if any(v <= 0 for v in self.gpu_speed.values()):
            raise ValueError(f"model {self.name}: GPU speeds must be > 0")
        if self.scaling_efficiency is not None and not 0.5 < self.scaling_efficiency <= 1.0:
            raise ValueError(f"model {self.name}: scaling_efficiency must be in (0.5, 1]")

    def speedup(self, gpus: int, default_efficiency: float = 1.0) -> float:
        """Throughput at ``gpus`` GPUs relative to one GPU (catalog curve)."""
        if gpus <= 0:
            return 0.0
        eff = self.scaling_efficiency if self.scaling_efficiency is not None else default_efficiency
        return gpus * eff ** math.log2(gpus)

    def spread_slowdown(self, gpu_type: str, gpus: int) -> float:
        """How many times slower ``gpus`` GPUs of ``gpu_type`` run this model spread over
        servers than on one (1.0 = no effect; the simulator applies it only with
        ``throughput: trace-placement``). Gavel's measured figures or a stated proxy:
        ``placement_figures``."""
        return placement_figures.spread_slowdown(self.name, gpu_type, gpus)

    def relative_speed(self, gpu_type: str, reference: str) -> float | None:
        """Speed on ``gpu_type`` relative to ``reference``; ``None`` when either is unknown."""
        a, b = self.gpu_speed.get(gpu_type), self.gpu_speed.get(reference)
        return a / b if a is not None and b is not None else None


def _rubick(
    name: str, params: float, hidden: int, layers: int, heads: int, seq: int, batch: int, dataset: str, eff: float
) -> ModelInfo:
    return ModelInfo(
        name=name,
        family="transformer",
        placement_sensitive=True,
        batch_size=batch,
        params=params,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        seq_len=seq,
        dataset=dataset,
        scaling_efficiency=eff,
        source={"architecture": RUBICK_SOURCE, "placement_sensitive": TIRESIAS_FLAG, "scaling": RUBICK_SCALING},
    )


def _classic(
    name: str,
    family: str,
    sensitive: bool,
    batch: int,
    dataset: str,
    speed: tuple[float, float, float],
    efficiency: float,
    params: float | None = None,
    measured: bool = False,
) -> ModelInfo:
    """``measured``: the per-type speeds are Gavel's measured ratios, not estimates."""
    return ModelInfo(
        name=name,
        family=family,
        placement_sensitive=sensitive,
        batch_size=batch,
        params=params,
        dataset=dataset,
        gpu_speed=dict(zip(GPU_TYPES, speed, strict=True)),
        scaling_efficiency=efficiency,
        source={
            "gpu_speed": GAVEL_MEASURED if measured else GAVEL_SPEED,
            "placement_sensitive": TIRESIAS_FLAG,
            "scaling": OPTIMUS_SCALING,
        },
    )


_MODELS: tuple[ModelInfo, ...] = (
    # The Rubick study's transformers (figures copied from models.csv).
    _rubick("vit", 86e6, 768, 12, 12, 1024, 64, "ImageNet-1K", 0.95),
    _rubick("roberta", 355e6, 1024, 24, 16, 1024, 64, "WikiText-2", 0.92),
    _rubick("bert", 336e6, 1536, 24, 16, 1024, 32, "WikiText-2", 0.92),
    _rubick("t5", 1.2e9, 1280, 16, 16, 768, 16, "Wikipedia", 0.88),
    _rubick("gpt2", 1.5e9, 1920, 24, 19, 1024, 16, "Wikipedia", 0.88),
    _rubick("llama7", 7e9, 4096, 32, 32, 2048, 8, "WuDaoCorpora", 0.85),
    _rubick("llama30", 30e9, 6656, 60, 52, 2048, 4, "WuDaoCorpora", 0.8),
    # CNN / RNN / RL / recommendation models of the Tiresias, Gavel and Blox studies.
    _classic("resnet18", "cnn", False, 128, "CIFAR-10", (1.0, 6.46, 9.96), 0.95, 11.7e6, measured=True),
    _classic("resnet50", "cnn", False, 64, "ImageNet", (1.0, 4.23, 7.10), 0.93, 25.6e6, measured=True),
    _classic("resnet101", "cnn", False, 64, "ImageNet", (1.0, 3.3, 9.0), 0.92, 44.5e6),
    _classic("vgg16", "cnn", True, 64, "ImageNet", (1.0, 3.0, 6.0), 0.8, 138e6),
    _classic("vgg19", "cnn", True, 64, "ImageNet", (1.0, 3.0, 6.2), 0.8, 144e6),
    _classic("alexnet", "cnn", True, 128, "ImageNet", (1.0, 2.6, 4.5), 0.75, 61e6),
    _classic("inception3", "cnn", False, 64, "ImageNet", (1.0, 3.2, 7.5), 0.93, 23.8e6),
    _classic("googlenet", "cnn", False, 128, "ImageNet", (1.0, 3.0, 6.5), 0.93, 6.8e6),
    _classic("cifar10", "cnn", False, 128, "CIFAR-10", (1.0, 2.5, 4.0), 0.95),
    _classic("imagenet", "cnn", False, 64, "ImageNet", (1.0, 4.23, 7.10), 0.93, measured=True),
    _classic("yolov3", "cnn", False, 16, "COCO", (1.0, 3.0, 6.0), 0.9, 62e6),
    _classic("cyclegan", "cnn", False, 1, "monet2photo", (1.0, 4.76, 8.77), 0.9, 28e6, measured=True),
    _classic("transformer", "transformer", True, 64, "WMT16", (1.0, 2.91, 4.92), 0.88, 65e6, measured=True),
    _classic("bert-base", "transformer", True, 32, "SQuAD", (1.0, 2.7, 5.0), 0.9, 110e6),
    _classic("lstm", "rnn", True, 20, "WikiText-2", (1.0, 3.39, 3.78), 0.85, 66e6, measured=True),
    _classic("deepspeech2", "rnn", True, 32, "LibriSpeech", (1.0, 2.4, 4.0), 0.85, 38e6),
    _classic("a3c", "rl", False, 4, "Pong", (1.0, 1.65, 2.09), 0.9, measured=True),
    _classic("recommendation", "recommendation", True, 512, "ML-20M", (1.0, 1.49, 0.71), 0.8, measured=True),
    _classic("ncf", "recommendation", True, 512, "ML-20M", (1.0, 1.7, 2.3), 0.8),
)

#: Tiresias's profiled models (``simulator/models.py`` of its reference simulator):
#: largest tensor / total size of the tensors it lists.
_TENSOR_SKEW = {
    "vgg19": 0.717,
    "vgg16": 0.744,
    "alexnet": 0.611,
    "resnet101": 0.075,
    "resnet50": 0.112,
    "imagenet": 0.112,
    "inception3": 0.138,
}
#: Models whose spread-placement slowdown has a figure (measured or proxy).
_SPREAD_SOURCED = {m.name for m in _MODELS if placement_figures.spread_source(m.name)}
_MODELS = tuple(
    dataclasses.replace(
        m,
        tensor_skew=_TENSOR_SKEW.get(m.name),
        source={
            **m.source,
            **({"spread_slowdown": placement_figures.spread_source(m.name)} if m.name in _SPREAD_SOURCED else {}),
            **({"tensor_skew": TENSOR_SKEW} if m.name in _TENSOR_SKEW else {}),
        },
    )
    for m in _MODELS
)

_BY_NAME: dict[str, ModelInfo] = {m.name: m for m in _MODELS}
#: Common spellings in traces and papers.
_ALIASES: dict[str, str] = {
    "resnet-18": "resnet18",
    "resnet-50": "resnet50",
    "resnet-101": "resnet101",
    "vgg-16": "vgg16",
    "vgg-19": "vgg19",
    "inception-v3": "inception3",
    "inceptionv3": "inception3",
    "bert_base": "bert-base",
    "gpt-2": "gpt2",
    "llama-7b": "llama7",
    "llama7b": "llama7",
    "llama-30b": "llama30",
    "llama30b": "llama30",
    "deepspeech": "deepspeech2",
    "lm": "lstm",
    "recoder": "recommendation",
}


def _key(name: str) -> str:
    key = name.strip().lower()
    return _ALIASES.get(key, key)


def known_models() -> tuple[str, ...]:
    """Names of every catalogued model, sorted."""
    return tuple(sorted(_BY_NAME))


def lookup(name: str | None) -> ModelInfo | None:
    """The model's entry, or ``None`` (no error) when the name is empty or unknown."""
    if not name:
        return None
    return _BY_NAME.get(_key(name))


def get_model(name: str) -> ModelInfo:
    """The model's entry; an unknown name is an error that lists the known ones."""
    info = lookup(name)
    if info is None:
        close = difflib.get_close_matches(_key(name), list(_BY_NAME), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(f"unknown model {name!r}{hint}; known models: {', '.join(known_models())}")
    return info


def mean_gpu_speed(gpu_type: str) -> float | None:
    """Cluster-wide stand-in for a model the catalog does not know: the mean relative speed
    (K80 = 1) of the catalogued models that have a figure for ``gpu_type``."""
    values = [m.gpu_speed[gpu_type] for m in _MODELS if gpu_type in m.gpu_speed]
    return sum(values) / len(values) if values else None
