"""Lucid's per-configuration sharing scores (the artifact's rule), on made-up profiles."""

from __future__ import annotations

import pytest

from shapeshift.engine.overheads import Overheads
from shapeshift.errors import InputError
from shapeshift.model import BatchSpec, ClusterSpec, JobSpec, NodeSpec
from shapeshift.policies.lucid.configs import ConfigProfiles
from shapeshift.policies.lucid.policy import Lucid, LucidParams
from shapeshift.sim.simulator import simulate

HEADER = "model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label\n"
# Made-up figures: one model, "toy", at two batch sizes that score differently, one at
# two AMP settings that agree, and ncf (a catalog model, Tiny per model) made Jumbo.
PROFILES = HEADER + (
    "toy,set,32,0,1,20.0,10.0,2048,0\n"
    "toy,set,256,0,1,90.0,60.0,10240,2\n"
    "toy,set,256,1,1,80.0,50.0,8192,2\n"
    "toy,set,64,0,1,50.0,20.0,4096,1\n"
    "toy,set,64,1,1,40.0,20.0,4096,0\n"
    "ncf,ml,1024,0,1,95.0,70.0,4096,2\n"
)


def profiles(tmp_path, text: str = PROFILES) -> str:
    path = tmp_path / "single.csv"
    path.write_text(text)
    return str(path)


def job(job_id: str, batch: int | None = None, model: str = "toy", submit: float = 0.0) -> JobSpec:
    size = None if batch is None else BatchSpec(batch)
    return JobSpec(job_id, submit, 1, duration=100.0, model=model, batch=size)


def test_a_job_is_scored_by_its_configuration_where_the_file_tells_it(tmp_path):
    table = ConfigProfiles.read(profiles(tmp_path))
    # Batch 32: one row, label 0, figures in percent and MiB -> fractions and GB.
    small = table.of(job("a", 32))
    assert small is not None and small.label == 0
    assert (small.profile.gpu_util, small.profile.mem_bw, small.profile.gpu_mem_gb) == (0.2, 0.1, 2.0)
    # Batch 256: two rows (AMP off and on) that agree on 2 -> the first row's figures.
    large = table.of(job("b", 256))
    assert large is not None and large.label == 2 and large.profile.gpu_mem_gb == 10.0
    # Batch 64: AMP off 1, AMP on 0; the job does not say which -> per model (None).
    assert table.of(job("c", 64)) is None
    # No batch size: all five toy rows, labels 0/1/2 -> per model.
    assert table.of(job("d")) is None
    # A model the file lacks, or a batch size it lacks -> per model.
    assert table.of(job("e", 32, model="other")) is None
    assert table.of(job("f", 128)) is None
    # Model names match case-insensitively (the catalog's "ncf", a file's "NCF").
    assert table.of(job("g", model="NCF")) is not None


def test_job_rows_give_each_job_its_configuration(tmp_path):
    # The artifact's trace layout: a job_id column; the row is that job's configuration,
    # whatever the job's own model or batch size say.
    text = "job_id,model,dataset,batchsize,amp,gpu_util,gmem_util,gmem\n7,toy,set,32,1,30.0,10.0,1024\n"
    table = ConfigProfiles.read(profiles(tmp_path, text))
    config = table.of(job("7", 999, model="ncf"))
    assert config is not None and config.amp and config.batch_size == 32 and config.label is None
    assert table.of(job("8", 32)) is None


@pytest.mark.parametrize(
    ("row", "line", "field"),
    [
        ("toy,set,32,0,1,nan,10,2048,0", 3, "gpu_util"),
        ("toy,set,32,0,1,120,10,2048,0", 3, "gpu_util"),
        ("toy,set,32,2,1,20,10,2048,0", 3, "amp"),
        ("toy,set,3.5,0,1,20,10,2048,0", 3, "batchsize"),
        ("toy,set,32,0,1,20,10,2048,3", 3, "label"),
        (",set,32,0,1,20,10,2048,0", 3, "model"),
    ],
)
def test_a_bad_row_is_one_error_naming_line_and_field(tmp_path, row, line, field):
    text = HEADER + "toy,set,32,0,1,20,10,2048,0\n" + row + "\n"
    with pytest.raises(InputError) as caught:
        ConfigProfiles.read(profiles(tmp_path, text))
    assert (caught.value.line, caught.value.field) == (line, field)


def test_missing_columns_and_missing_file_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="lack columns"):
        ConfigProfiles.read(profiles(tmp_path, "model,dataset,batchsize\ntoy,set,32\n"))
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"model,dataset\n\xff\xfe\n")
    with pytest.raises(InputError, match="not UTF-8"):
        ConfigProfiles.read(binary)
    with pytest.raises(InputError, match="cannot read"):
        Lucid(LucidParams(profiles=str(tmp_path / "absent.csv")))


def one_gpu() -> ClusterSpec:
    return ClusterSpec((NodeSpec("n0", 1, 8, 64, gpu_mem_gb=24.0),), gpu_share_limit=2)


def test_per_configuration_scores_decide_who_pairs(tmp_path):
    # No profiler (profiler_nodes=0), one GPU shared by at most two jobs. a takes the GPU at
    # 0, b arrives at 1; both ncf at batch 1024. Per model, ncf profiles as NeuMF: Tiny (0),
    # 0 + 0 <= 2, so b joins a at 1. Per configuration the file labels ncf batch 1024
    # Jumbo (2): 2 + 2 > 2, so b waits for a to end at 1000.
    jobs = [
        JobSpec("a", 0.0, 1, duration=1000.0, model="ncf", batch=BatchSpec(1024)),
        job("b", 1024, model="ncf", submit=1.0),
    ]
    path = profiles(tmp_path)
    starts = {}
    for scores in ("model", "configuration"):
        policy = Lucid(LucidParams(profiler_nodes=0, profiles=path, scores=scores))
        result = simulate(jobs, one_gpu(), policy, overheads=Overheads(0.0, 0.0))
        starts[scores] = {j.job_id: j.first_start for j in result.jobs}["b"]
    assert starts == {"model": pytest.approx(1.0), "configuration": pytest.approx(1000.0)}
    assert policy.summary_fields()["lucid_scored_by_configuration"] == 2


def test_a_configuration_pairs_by_its_own_label_and_memory(tmp_path):
    # toy batch 32 (label 0, 2 GB) and toy batch 256 (label 2, 10 GB): 0 + 2 <= 2 and
    # 2 + 10 GB within 24 GB, so the newcomer joins at 1. Two batch-256
    # jobs: 2 + 2 > 2, the newcomer waits until 1000.
    path = profiles(tmp_path)
    first = JobSpec("a", 0.0, 1, duration=1000.0, model="toy", batch=BatchSpec(256))
    for batch, start in ((32, 1.0), (256, 1000.0)):
        policy = Lucid(LucidParams(profiler_nodes=0, profiles=path))
        result = simulate([first, job("b", batch, submit=1.0)], one_gpu(), policy, overheads=Overheads(0.0, 0.0))
        assert {j.job_id: j.first_start for j in result.jobs}["b"] == pytest.approx(start)
    assert policy.scores == {"a": 2, "b": 2}


def test_monotone_gpus_pools_a_shorter_estimate_for_more_gpus():
    # The thesis's PAV rule on the duration estimate's GPU-count shape: 50 jobs each of 1,
    # 2, 4 and 8 GPUs lasting 1000, 500, 2000 and 4000 s. Unconstrained, 2 GPUs predict
    # less than 1. Pool-adjacent violators pools the 1- and 2-GPU bins into their
    # count-weighted mean (equal counts: the plain mean) and leaves 4 and 8 in order.
    from shapeshift.perf.colocation import SharingProfile
    from shapeshift.policies.lucid.models import DurationModel, PrAMSettings

    PROFILE = SharingProfile(0.5, 0.2, 3.0)
    settings = PrAMSettings(interactions=0, max_rounds=2000)
    fitted = {}
    for monotone in (False, True):
        model = DurationModel(settings=settings, monotone_gpus=monotone)
        for i, (gpus, seconds) in enumerate([(1, 1000.0), (2, 500.0), (4, 2000.0), (8, 4000.0)] * 50):
            model.observe(JobSpec(f"j{i}", 0.0, gpus, duration=seconds), PROFILE, seconds)
        model.fit()
        specs = [JobSpec(f"q{g}", 0.0, g, duration=1.0) for g in (1, 2, 4, 8)]
        fitted[monotone] = model.predict(specs, [PROFILE] * 4)
    free, pav = fitted[False], fitted[True]
    assert free[1] < free[0]
    assert pav[0] == pytest.approx(pav[1]) and pav[0] == pytest.approx((free[0] + free[1]) / 2)
    assert pav[1] <= pav[2] <= pav[3] and pav[2:] == pytest.approx(free[2:])


def test_the_forecaster_still_fits_beside_monotone_gpus():
    # Found by the Philly run with oracle durations: the GPU-count rule was applied to the
    # submission forecaster's fit too, which has no GPU count, and every fit failed.
    # Three days of one submission per 10-minute bin: the forecaster fits and forecasts.
    from shapeshift.policies.lucid.models import PrAMSettings, SubmissionForecaster

    forecaster = SubmissionForecaster(settings=PrAMSettings(interactions=0, max_rounds=20))
    for b in range(3 * 144):
        forecaster.observe_submit(b * 600.0 + 1.0)
    now = 3 * 86400.0
    assert forecaster.fit(now) and forecaster.forecast(now) is not None
