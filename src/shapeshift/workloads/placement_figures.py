"""How much slower a model trains when its GPUs are spread over servers: measured figures.

Source: Gavel's throughput file (Narayanan et al., OSDI 2020; stanford-futuredata/gavel
``scheduler/simulation_throughputs.json``) lists, for each model, batch size and GPU count
(scale factor 2, 4, 8), the isolated throughput (steps/s) on each GPU type with the GPUs
on one server (``"v100"``, ``"p100"``, ``"k80"``) and spread over servers
(``"v100_unconsolidated"``, ...). The slowdown is consolidated / unconsolidated, taken
at the catalog's batch size for the four catalogued models Gavel measured with more than
one GPU: ResNet-18 (batch 128), ResNet-50 (batch 64, also ``imagenet``), Transformer
(batch 64) and LM (the catalog's ``lstm``, batch 20). The pairs below are copied from
that file (rounded to 3 decimals).

Rules for what the table does not cover (``spread_slowdown``):

* a ratio below 1 (the spread run measured faster, e.g. ResNet-50 at 4 and 8 V100s,
  ResNet-18 on K80s) counts as 1: no slowdown, not a speed-up;
* a GPU count between the measured ones uses the largest measured count below it (3 -> 2,
  16 -> 8); one GPU never slows;
* a GPU type without figures for the model (ResNet-50 on K80, or any type other than
  K80/P100/V100) uses the V100 figures, the catalog's reference type;
* a model Gavel did not measure but Tiresias flags as placement-sensitive (VGG, AlexNet,
  BERT-base, DeepSpeech2, NCF, Recommendation: large, skewed tensors; Tiresias, NSDI 2019,
  Sec. 3.3) uses a stated proxy: the geometric mean of the Transformer and LM figures,
  Gavel's two measured sensitive models, at the same type and count; any other model does
  not slow.

The Tiresias paper reports the same effect for the VGG family in a figure; its numbers
could not be read back from here, so no figure of this table comes from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

GAVEL_FILE = "stanford-futuredata/gavel scheduler/simulation_throughputs.json"

#: model -> GPU type -> GPU count -> (consolidated, unconsolidated) throughput, steps/s.
MEASURED: Mapping[str, Mapping[str, Mapping[int, tuple[float, float]]]] = {
    "resnet18": {  # 'ResNet-18 (batch size 128)'
        "V100": {2: (23.985, 24.511), 4: (69.951, 35.361), 8: (162.092, 61.136)},
        "P100": {2: (24.227, 19.569), 4: (45.351, 32.993), 8: (85.079, 60.464)},
        "K80": {2: (3.631, 3.948), 4: (6.982, 7.93), 8: (13.664, 15.768)},
    },
    "resnet50": {  # 'ResNet-50 (batch size 64)'; no multi-GPU K80 figures
        "V100": {2: (7.922, 6.866), 4: (9.452, 11.136), 8: (17.303, 19.757)},
        "P100": {2: (5.516, 5.606), 4: (10.365, 10.564), 8: (18.221, 18.904)},
    },
    "transformer": {  # 'Transformer (batch size 64)'
        "V100": {2: (15.876, 7.005), 4: (19.66, 10.57), 8: (49.651, 17.01)},
        "P100": {2: (7.887, 5.505), 4: (13.313, 9.007), 8: (19.943, 15.178)},
        "K80": {2: (3.063, 2.727), 4: (5.031, 4.507), 8: (8.976, 8.234)},
    },
    "lstm": {  # 'LM (batch size 20)'
        "V100": {2: (132.174, 30.437), 4: (110.997, 33.398), 8: (497.295, 58.888)},
        "P100": {2: (62.332, 32.86), 4: (93.815, 40.939), 8: (116.649, 65.832)},
        "K80": {2: (23.773, 16.926), 4: (35.703, 29.988), 8: (61.449, 58.07)},
    },
}
#: Catalog names that share a measured model's figures.
SAME_AS: Mapping[str, str] = {"imagenet": "resnet50"}
#: Placement-sensitive models (Tiresias) without a Gavel measurement: they use the proxy.
PROXY_MODELS = frozenset({"vgg16", "vgg19", "alexnet", "bert-base", "deepspeech2", "ncf", "recommendation"})
PROXY_OF = ("transformer", "lstm")
REFERENCE_TYPE = "V100"


def _measured(model: str, gpu_type: str, gpus: int) -> float:
    by_type = MEASURED[model]
    table = by_type.get(gpu_type) or by_type[REFERENCE_TYPE]
    counts = [c for c in sorted(table) if c <= gpus]
    consolidated, spread = table[counts[-1]]
    return max(consolidated / spread, 1.0)


def spread_slowdown(model: str, gpu_type: str, gpus: int) -> float:
    """How many times slower ``model`` (a catalog name) runs on ``gpus`` GPUs of
    ``gpu_type`` spread over servers than on one server (module docstring)."""
    if gpus < 2:
        return 1.0
    name = SAME_AS.get(model, model)
    if name in MEASURED:
        return _measured(name, gpu_type, gpus)
    if name in PROXY_MODELS:
        return math.prod(_measured(m, gpu_type, gpus) for m in PROXY_OF) ** (1 / len(PROXY_OF))
    return 1.0


def spread_source(model: str) -> str | None:
    """Where ``model``'s figures come from; ``None`` when it never slows."""
    name = SAME_AS.get(model, model)
    if name in MEASURED:
        return f"measured: consolidated / unconsolidated isolated throughput, {GAVEL_FILE}"
    if name in PROXY_MODELS:
        return f"proxy (not measured): geometric mean of Gavel's Transformer and LM figures, {GAVEL_FILE}"
    return None
