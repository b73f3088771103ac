"""List and mapping policy parameters typed on the command line."""

from __future__ import annotations

import pytest
from pydantic import Field
from typer.testing import CliRunner

from shapeshift.cli.main import app
from shapeshift.errors import InputError
from shapeshift.policies.framework.registry import PolicyInfo, PolicyParams, _typed_values, make_policy, policy_info


@pytest.mark.parametrize("text", ["3250,7200", "[3250, 7200]", " 3250 , 7200 "])
def test_tiresias_thresholds_from_text(text):
    # Tiresias' two queue limits (3,250 and 7,200 GPU-seconds), however they are typed.
    assert make_policy("tiresias", {"thresholds": text}).thresholds == (3250.0, 7200.0)


def test_a_bad_element_is_named_by_its_position_and_value():
    with pytest.raises(InputError) as caught:
        make_policy("tiresias", {"thresholds": "3250,abc"})
    assert "thresholds element 2 ('abc')" in str(caught.value)
    with pytest.raises(InputError, match=r"thresholds element 1 \('x'\)"):
        make_policy("tiresias", {"thresholds": '["x", 7200]'})


def test_broken_json_is_one_clear_line():
    with pytest.raises(InputError, match="is not valid JSON"):
        make_policy("tiresias", {"thresholds": "[3250,"})


class _Mapped(PolicyParams):
    weights: dict[str, float] = Field(default_factory=dict)
    names: list[str] | None = None


_INFO = PolicyInfo("mapped", "a test model", _Mapped, lambda p: p)  # type: ignore[arg-type]


def test_mapping_parameters_from_pairs_or_json():
    assert _Mapped.model_validate(_typed_values(_INFO, {"weights": "a:1, b:2.5"})).weights == {"a": 1.0, "b": 2.5}
    assert _Mapped.model_validate(_typed_values(_INFO, {"weights": '{"a": 3}'})).weights == {"a": 3.0}
    with pytest.raises(InputError, match="key:value pairs"):
        _typed_values(_INFO, {"weights": "a:1,b"})


def test_nothing_after_the_equals_sign_is_an_empty_list_or_mapping():
    # "name=" typed on the command line: the empty text was taken for JSON and refused.
    assert _typed_values(_INFO, {"names": "", "weights": " "}) == {"names": [], "weights": {}}


def test_an_optional_list_parameter_splits_too():
    assert _typed_values(_INFO, {"names": "x,y"}) == {"names": ["x", "y"]}


def test_the_command_line_takes_both_forms():
    runner = CliRunner()
    for text in ("thresholds=3250,7200", "thresholds=[3250,7200]"):
        result = runner.invoke(app, ["simulate", "--policy", "tiresias", "--policy-arg", text, "-q"])
        assert result.exit_code == 0, result.output
    bad = runner.invoke(app, ["simulate", "--policy", "tiresias", "--policy-arg", "thresholds=1,x", "-q"])
    assert bad.exit_code == 2 and "element 2 ('x')" in bad.output and "Traceback" not in bad.output


def test_none_turns_off_a_parameter_whose_off_value_is_none():
    # rubick's starvation_threshold is ``float | None`` (None: the rule is off), so the
    # command line's ``none`` must reach it as None; a plain float parameter refuses it.
    rubick = policy_info("rubick")
    for word in ("none", "NONE "):
        values = _typed_values(rubick, {"starvation_threshold": word})
        assert rubick.params.model_validate(values).starvation_threshold is None
    make_policy("rubick", {"starvation_threshold": "none"})  # builds
    with pytest.raises(InputError, match="starvation_threshold"):
        make_policy("rubick", {"starvation_threshold": "never"})
    with pytest.raises(InputError):
        make_policy("tiresias", {"starvation": "none"})
