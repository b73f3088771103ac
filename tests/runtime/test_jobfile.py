"""Job files are validated completely before anything is stored."""

from __future__ import annotations

import pytest

from shapeshift.errors import InputError
from shapeshift.runtime.jobfile import parse_job_text

GOOD = """
name: gpt
command: "{python} -m shapeshift.train --iterations {iterations}"
model: gpt-tiny
global_batch: 16
plan: dp=2,ga=2
iterations: 40
tenant: a
guaranteed: true
"""


def test_good_file_gives_a_spec_with_the_plan_gpus():
    job = parse_job_text(GOOD)
    spec = job.spec("7", 0.0)
    assert spec.num_gpus == 2 and spec.plan is not None and spec.plan.grad_accum == 2
    assert spec.tenant == "a" and spec.guaranteed and spec.iterations == 40


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("name: x\ncommand: run\n", None, "iterations"),
        ("name: x\ncommand: run {nope}\niterations: 3\n", "command", "unknown placeholder {nope}"),
        ("name: x\ncommand: run\niterations: -1\n", "iterations", "greater than or equal to 1"),
        ("name: x\ncommand: run\niterations: 3\nplan: dp=two\n", "plan", "positive integer"),
        ("name: x\ncommand: run\niterations: 3\nplan: dp=2\nresources: {gpus: 4}\n", None, "plan uses 2 GPUs"),
        ("name: x\ncommand: run\niterations: 3\ncolour: red\n", "colour", "unknown field"),
        ("name: x\ncommand: run\niterations: 3\nmodel: gpt\n", None, "global_batch"),
        ("- just a list\n", None, "mapping"),
        ("name: [unclosed\n", None, "not valid YAML"),
    ],
)
def test_malformed_files_name_the_field_and_reason(text, field, words):
    with pytest.raises(InputError) as info:
        parse_job_text(text, "job.yaml")
    assert info.value.field == field
    assert words in str(info.value)
