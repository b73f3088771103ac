"""The model catalog and the throughput model that reads it."""

from __future__ import annotations

import csv

import pytest

from shapeshift.errors import InputError
from shapeshift.model import Allocation, ClusterSpec, NodeSpec, Resources
from shapeshift.perf.throughput import TraceSpeedModel
from shapeshift.workloads.catalog import get_model, known_models, lookup
from tests.conftest import bundled, job


def test_catalog_answers_the_scheduler_questions():
    assert get_model("vgg16").placement_sensitive and not get_model("resnet50").placement_sensitive
    assert get_model("ResNet-50") is get_model("resnet50")  # aliases and case
    # Gavel's measured 1-GPU throughputs (simulation_throughputs.json): A3C 7.176 on a V100
    # against 3.439 on a K80; ResNet-50 at batch 64 2.619 on a P100 against 4.395 on a V100.
    assert get_model("a3c").relative_speed("V100", "K80") == pytest.approx(7.176 / 3.439, abs=0.01)
    assert get_model("resnet50").relative_speed("P100", "V100") == pytest.approx(2.619 / 4.395, abs=0.01)
    assert get_model("vgg16").speedup(1) == 1.0 and get_model("vgg16").speedup(2) == pytest.approx(1.6)
    assert lookup("nothing-like-it") is None and lookup("") is None
    for name in ("vit", "roberta", "bert", "t5", "gpt2", "llama7", "llama30", "resnet18", "lstm", "ncf"):
        assert name in known_models()
    for name in known_models():
        info = get_model(name)
        assert info.source and info.batch_size > 0


def test_unknown_model_error_lists_the_known_ones():
    with pytest.raises(InputError, match=r"known models: .*resnet50") as err:
        get_model("resnet5")
    assert "did you mean 'resnet50'" in str(err.value)


def test_rubick_models_match_the_artifact_table():
    path = bundled("rubick-models")
    with path.open() as handle:
        for row in csv.DictReader(handle):
            info = get_model(row["model"])
            assert info.params == float(row["params"])
            assert (info.hidden_size, info.num_layers, info.num_heads) == (
                int(row["hidden_size"]),
                int(row["num_layers"]),
                int(row["num_heads"]),
            )
            assert (info.seq_len, info.batch_size, info.dataset) == (
                int(row["seq_len"]),
                int(row["local_batch"]),
                row["dataset"],
            )


def _two_types() -> ClusterSpec:
    return ClusterSpec(nodes=(NodeSpec("v", 4, 32, 256, gpu_type="V100"), NodeSpec("k", 4, 32, 256, gpu_type="K80")))


def test_trace_speed_model_applies_catalog_speed_and_scaling():
    model = TraceSpeedModel(_two_types())
    on_k80 = Allocation(((1, Resources(1)),))
    on_v100 = Allocation(((0, Resources(1)),))
    res = job("r", 0, 1, 100, model="resnet50")
    assert model.rate(res, on_v100) == 1.0
    assert model.rate(res, on_k80) == pytest.approx(1 / 7.10)
    # A job the catalog does not know keeps the old behaviour: speed 1 everywhere, linear.
    plain = job("p", 0, 2, 100)
    assert model.rate(plain, on_k80) == pytest.approx(0.5)
    assert TraceSpeedModel(_two_types(), scaling_efficiency=0.5).rate(plain, on_k80) == pytest.approx(1 / 1.5)
    # vgg16 at 1 GPU of a 2-GPU request: S(1) / S(2) = 1 / 1.6, times the V100 speed (1.0).
    assert model.rate(job("g", 0, 2, 100, model="vgg16"), on_v100) == pytest.approx(1 / 1.6)
    assert TraceSpeedModel(_two_types(), catalog=False).rate(res, on_k80) == 1.0


def test_a_job_gives_its_own_throughput_per_gpu_type():
    # The job's own figures win over the catalog: 2 on a V100, 1 on a K80 -> half speed on
    # the K80 (relative to its fastest type); a type it does not list cannot run it.
    model = TraceSpeedModel(_two_types())
    own = job("o", 0, 1, 100, model="resnet50", gpu_speed=(("K80", 1.0), ("V100", 2.0)))
    assert model.rate(own, Allocation(((1, Resources(1)),))) == pytest.approx(0.5)
    assert model.rate(own, Allocation(((0, Resources(1)),))) == pytest.approx(1.0)
    v100_only = job("v", 0, 1, 100, gpu_speed=(("V100", 3.0),))
    assert model.rate(v100_only, Allocation(((1, Resources(1)),))) == 0.0
