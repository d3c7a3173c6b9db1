"""The exported JSON Schema accepts every shipped playbook and refuses what the loader refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tritonguard.actions.registry import schemas
from tritonguard.core.playbook_model import json_schema

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
FILES = sorted(PLAYBOOKS.glob("*.yaml"))


def _validator() -> jsonschema.Draft202012Validator:
    schema: dict[str, Any] = json.loads(json.dumps(json_schema(schemas)))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_shipped_playbook_validates_against_the_schema(path: Path) -> None:
    """Durations written as '30m' or '90s' are strings the schema accepts, not numbers."""
    validator = _validator()
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if doc is not None:
            errors = [e.message for e in validator.iter_errors(doc)]
            assert errors == [], f"{path.name}: {errors}"


def test_a_duration_without_a_known_unit_is_refused_by_the_schema() -> None:
    """'30 minutes' fails in the editor as it fails in `tritonguard validate`."""
    doc = yaml.safe_load(FILES[0].read_text(encoding="utf-8"))
    assert isinstance(doc, dict) and "cooldown" in doc["guards"], "a shipped cooldown"
    doc["guards"]["cooldown"] = "30 minutes"
    assert list(_validator().iter_errors(doc))
