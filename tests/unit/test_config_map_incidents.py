"""An incident after a mounted ConfigMap changed names it: JSON, Slack root, Event, summary."""

from __future__ import annotations

from tests.unit.test_rollout_changes import ROLLOUT, incident
from tritonguard.core.cluster_events import note_for_incident
from tritonguard.core.config_map_changes import ConfigMapChange, ConfigMapData, ConfigMapReads
from tritonguard.core.engine import Engine
from tritonguard.core.findings import Subject
from tritonguard.core.slack_message import what_changed

POD = "triton-a-7-x"
SUBJECT = Subject("ml", "ranker", POD)
CONFIG = "max_batch_size: 8\ndynamic_batching {\n  max_queue_delay_microseconds: 500\n}\n"


def _edit(at: float = 1010.0) -> ConfigMapChange:
    """Return the change of ConfigMap models-config raising the delay, seen at ``at``."""
    reads = ConfigMapReads()
    reads.read(ConfigMapData("ml", "models-config", "41", {"config.pbtxt": CONFIG}), 900.0)
    raised = CONFIG.replace("500", "150000")
    change = reads.read(
        ConfigMapData("ml", "models-config", "42", {"config.pbtxt": raised}),
        at,
        unchanged_until=at - 1.0,
    )
    assert change is not None
    return change


def test_the_engine_names_the_config_map_alone_and_beside_a_rollout() -> None:
    """A pod's ConfigMap change is the incident's change by itself, or added to a rollout's."""
    engine = Engine()
    assert engine.note_config_map("ml", POD, _edit())
    alone = engine.change_before(SUBJECT, 1040.0)
    assert alone is not None and alone.config_map is not None and alone.rollout is None
    out = alone.as_dict(onset=1040.0)
    assert out["kind"] == "config_map"
    assert out["config_map"]["seen_before_onset_s"] == 30.0
    assert out["config_map"]["keys"] == ["config.pbtxt"]
    assert alone.summary() == (
        "ConfigMap models-config key config.pbtxt changed (config.pbtxt:3: "
        "max_queue_delay_microseconds: 500 → max_queue_delay_microseconds: 150000)"
    )
    engine.note_rollout("ml", POD, ROLLOUT)
    both = engine.change_before(SUBJECT, 1040.0)
    assert both is not None and both.rollout == ROLLOUT and both.config_map == alone.config_map
    assert both.as_dict(onset=1040.0)["kind"] == "rollout"
    assert engine.change_before(Subject("ml", "ranker", "other-pod"), 1040.0) is None
    # Seen after the onset with the watch in sync: it cannot be what the incident followed.
    late = Engine()
    late.note_config_map("ml", POD, _edit(at=1100.0))
    assert late.change_before(SUBJECT, 1040.0) is None


def test_slack_and_the_event_name_the_config_map_its_key_and_lead() -> None:
    """Slack's "What changed" and the Event's note name the ConfigMap, key, line and lead."""
    engine = Engine()
    engine.note_config_map("ml", POD, _edit())
    ev = incident(engine.change_before(SUBJECT, 1040.0))
    assert what_changed(ev).splitlines() == [
        "*What changed* 30 s before it opened: ConfigMap models-config key config.pbtxt "
        "(resourceVersion 41 → 42)",
        "• `config.pbtxt:3`: max_queue_delay_microseconds: 500 → "
        "max_queue_delay_microseconds: 150000",
    ]
    note = note_for_incident(ev)
    assert note is not None
    assert (
        "After: ConfigMap models-config key config.pbtxt changed 30 s before onset "
        "(config.pbtxt:3: max_queue_delay_microseconds: 500 → max_queue_delay_microseconds: "
        "150000)." in note.note
    )
    engine.note_rollout("ml", POD, ROLLOUT)
    both = note_for_incident(incident(engine.change_before(SUBJECT, 1040.0)))
    assert both is not None
    assert "Also: ConfigMap models-config key config.pbtxt changed 30 s before onset" in both.note
    assert "*Also changed* 30 s before it opened" in what_changed(
        incident(engine.change_before(SUBJECT, 1040.0))
    )


def test_an_open_incident_is_announced_again_when_its_config_map_changes() -> None:
    """A change already told to the pod is no news; a new one is."""
    engine = Engine()
    change = _edit()
    assert engine.note_config_map("ml", POD, change)
    assert not engine.note_config_map("ml", POD, change)
