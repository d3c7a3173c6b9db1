"""docs/detection.md carries every threshold with its default and derivation, as the code has it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tritonguard.cli.cmd_thresholds import markdown, yaml_overrides
from tritonguard.core.thresholds import Thresholds
from tritonguard.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "detection.md"


def test_the_documented_table_is_the_generated_one() -> None:
    """Change a threshold or its reason and the doc must be regenerated (`tritonguard thresholds`)."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- thresholds:begin -->\n(.*)<!-- thresholds:end -->", text, re.S)
    assert m is not None, "docs/detection.md lost its thresholds markers"
    assert m.group(1) == markdown()


def test_every_threshold_states_a_reason() -> None:
    """A number without a derivation is a number tuned to the lab: each says why it is what it is."""
    thin = [
        name
        for name, field in Thresholds.model_fields.items()
        if field.default is not None and len(field.description or "") < 60
    ]
    assert thin == []


def test_the_yaml_fragment_loads_as_settings_with_the_defaults() -> None:
    """`tritonguard thresholds --format yaml` is a valid config fragment that changes nothing."""
    data = yaml.safe_load(yaml_overrides())
    assert Settings(**data).thresholds == Thresholds()
