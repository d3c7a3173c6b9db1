"""Playbook loading: positioned errors at load time, sandboxed templates, schema, matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonguard.actions.registry import catalog, schemas
from tritonguard.core.findings import CAUSES, Evidence, Fix, IncidentEvent, Subject
from tritonguard.core.playbook_model import PlaybookError, json_schema, load_playbooks_text
from tritonguard.core.templating import TemplateError, incident_context, render_string, render_value
from tritonguard.runtime.playbook_files import load_playbook_files

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"

GOOD = """\
name: ok
when: {causes: [batching_delay]}
steps:
  - action: triton.update_config
    params:
      set: {dynamic_batching.max_queue_delay_microseconds: 500}
"""


def problems(text: str) -> list[str]:
    """Return the problem lines loading ``text`` raises."""
    with pytest.raises(PlaybookError) as err:
        load_playbooks_text(text, "pb.yaml", catalog())
    return err.value.problems


def event() -> IncidentEvent:
    """Return a batching_delay incident with one evidence value."""
    return IncidentEvent(
        event="opened",
        incident_id="i1",
        cause="batching_delay",
        subject=Subject("prod", "resnet", "triton-0"),
        at=130.0,
        confidence=0.8,
        summary="queue dominates",
        evidence={"queue_share": Evidence(0.87, "ratio", 60, "q")},
        fix=Fix("lower the delay"),
        opened_at=100.0,
    )


def test_every_default_playbook_loads_and_every_cause_has_one() -> None:
    """playbooks/ ships one valid playbook per cause of the catalogue."""
    books = load_playbook_files([PLAYBOOKS])
    covered = {c for b in books for c in b.when.causes}
    assert covered == set(CAUSES)
    assert all(b.guards.dry_run for b in books)


def test_unknown_action_is_reported_at_its_line_and_column() -> None:
    """A misspelt action names file:line:col and lists the known actions."""
    [line] = problems(GOOD.replace("triton.update_config", "triton.update_confg"))
    assert line.startswith("pb.yaml:4:13: unknown action 'triton.update_confg'")
    assert "triton.update_config" in line


def test_bad_parameter_and_unknown_field_point_at_the_value() -> None:
    """Parameter errors point inside params; unknown fields are named with what to do."""
    [line] = problems(GOOD.replace("set:", "sett:"))
    assert line.startswith("pb.yaml:6:7: unknown field 'sett'")
    lines = problems(GOOD.replace("when: {causes: [batching_delay]}", "when: {causes: [nope]}"))
    assert lines[0].startswith("pb.yaml:2:") and "unknown cause 'nope'" in lines[0]


def test_template_with_unknown_name_or_bad_syntax_fails_at_load() -> None:
    """Templates may only use incident fields; syntax errors are caught before 3 a.m."""
    text = GOOD + "  - action: slack.post\n    params: {text: '{{ secret }}'}\n"
    [line] = problems(text)
    assert line.startswith("pb.yaml:8:20:") and "unknown name(s) secret" in line
    [line] = problems(GOOD + "  - action: slack.post\n    params: {text: '{{ model + }}'}\n")
    assert "template syntax error" in line


def test_templated_numbers_are_checked_at_render_time_not_load_time() -> None:
    """A template in a numeric field loads; literal wrong types do not."""
    load_playbooks_text(
        GOOD.replace("500", "'{{ evidence.queue_share * 1000 }}'"), "pb.yaml", catalog()
    )
    lines = problems(GOOD + "  - action: triton.warmup\n    params: {requests: many}\n")
    assert lines[0].startswith("pb.yaml:8:") and "requests" in lines[0]


def test_yaml_syntax_and_duplicate_keys_are_positioned() -> None:
    """Broken YAML and duplicate keys (which YAML would silently merge) are errors."""
    [line] = problems("name: [x\n")
    assert line.startswith("pb.yaml:2:1: YAML syntax error")
    [line] = problems(GOOD + "name: again\n")
    assert line.startswith("pb.yaml:7:1: duplicate key 'name'")


def test_sandbox_renders_incident_fields_and_refuses_code() -> None:
    """Templates see subject, cause and evidence; attribute tricks are stopped by the sandbox."""
    ctx = incident_context(event())
    assert (
        render_string("{{ model }}/{{ pod }} {{ evidence.queue_share }}", ctx)
        == "resnet/triton-0 0.87"
    )
    assert render_value({"a": ["{{ held_for_s }}"]}, ctx) == {"a": ["30.0"]}
    with pytest.raises(TemplateError):
        render_string("{{ model.__class__.__mro__ }}", ctx)
    with pytest.raises(TemplateError, match="compute_us"):
        render_string("{{ evidence.compute_us }}", ctx)


def test_json_schema_lists_actions_and_their_parameters() -> None:
    """`tritonguard schema` gives editors the actions and each one's parameters."""
    schema = json_schema(schemas)
    step = schema["$defs"]["Step"]
    assert "triton.update_config" in step["properties"]["action"]["enum"]
    rule = next(
        r for r in step["allOf"] if r["if"]["properties"]["action"]["const"] == "triton.shed_load"
    )
    assert "max_queue_size" in rule["then"]["properties"]["params"]["properties"]
    assert "source" not in schema["properties"]


def test_matching_by_cause_confidence_and_subject() -> None:
    """when.causes, min_confidence and label matchers decide whether a playbook applies."""
    [b] = load_playbooks_text(GOOD, "pb.yaml", catalog())
    assert b.matches(event()) is None
    strict = b.model_copy(update={"when": b.when.model_copy(update={"min_confidence": 0.9})})
    assert "min_confidence" in (strict.matches(event()) or "")
    text = GOOD.replace(
        "{causes: [batching_delay]}", "{causes: [batching_delay], match: {namespace: 'staging-.*'}}"
    )
    [scoped] = load_playbooks_text(text, "pb.yaml", catalog())
    assert scoped.matches(event()) == "subject does not match when.match"


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_alias_bomb_is_one_refusal_line_that_survives_gathering(tmp_path: Path) -> None:
    """A billion-laughs playbook is refused at its line, marked so commands exit 2, not 1."""
    with pytest.raises(PlaybookError) as err:
        load_playbooks_text(LAUGHS, "pb.yaml", catalog())
    [line] = err.value.problems
    assert line.startswith("pb.yaml:5:") and "billion laughs" in line and err.value.refused
    (tmp_path / "bomb.yaml").write_text(LAUGHS)
    (tmp_path / "typo.yaml").write_text(GOOD.replace("set:", "sett:"))
    with pytest.raises(PlaybookError) as gathered:
        load_playbook_files([tmp_path])
    assert len(gathered.value.problems) == 2 and gathered.value.refused


def test_an_invalid_playbook_is_not_a_refusal() -> None:
    """Ordinary mistakes stay ordinary (exit 1 from validate): only oversized input is refused."""
    with pytest.raises(PlaybookError) as err:
        load_playbooks_text("name: [unclosed\n", "pb.yaml", catalog())
    assert not err.value.refused


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_durations_must_be_finite(value: str) -> None:
    """A NaN cooldown compares false with every time and would silently turn the guard off."""
    text = GOOD.replace("steps:", f"guards: {{cooldown: {value}}}\nsteps:")
    [line] = problems(text)
    assert line.startswith("pb.yaml:3:") and "finite number of seconds" in line
