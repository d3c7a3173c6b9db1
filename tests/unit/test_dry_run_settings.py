"""The two dry-run switches: their forms in a file and the environment, and what they decide."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritonguard.core.guards import GuardSettings, step_dry_run
from tritonguard.core.playbook_model import Guards
from tritonguard.settings import SettingsError, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test from an environment without TRITONGUARD_* variables."""
    for name in list(os.environ):
        if name.startswith("TRITONGUARD_"):
            monkeypatch.delenv(name)


def _switches(path: Path, text: str) -> tuple[bool, bool]:
    path.write_text(text)
    s = load_settings(path)
    return s.dry_run.notify, s.dry_run.remediate


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dry_run: true\n", (True, True)),
        ("dry_run: false\n", (False, False)),
        ("dry_run: {notify: false}\n", (False, True)),
        ("dry_run: {remediate: false}\n", (True, False)),
        ("dry_run: {notify: false, remediate: false}\n", (False, False)),
        ("listen: 127.0.0.1:1\n", (True, True)),
    ],
)
def test_file_forms(tmp_path: Path, text: str, expected: tuple[bool, bool]) -> None:
    """The old boolean sets both switches; the mapping sets each, an unset one stays on."""
    assert _switches(tmp_path / "c.yaml", text) == expected


def test_unknown_switch_is_rejected(tmp_path: Path) -> None:
    """A typo in a switch name is an error naming it, not a switch silently left on."""
    with pytest.raises(SettingsError, match=r"dry_run\.notfy"):
        _switches(tmp_path / "c.yaml", "dry_run: {notfy: false}\n")


def test_env_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRITONGUARD_DRY_RUN=false sets both; TRITONGUARD_DRY_RUN__NOTIFY sets one over a file."""
    monkeypatch.setenv("TRITONGUARD_DRY_RUN", "false")
    assert _switches(tmp_path / "a.yaml", "listen: 127.0.0.1:1\n") == (False, False)
    monkeypatch.delenv("TRITONGUARD_DRY_RUN")
    monkeypatch.setenv("TRITONGUARD_DRY_RUN__NOTIFY", "false")
    assert _switches(tmp_path / "b.yaml", "dry_run: {remediate: true}\n") == (False, True)


def test_env_switch_over_an_old_boolean_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One switch from the environment over a file's old ``dry_run: false`` keeps the other off."""
    monkeypatch.setenv("TRITONGUARD_DRY_RUN__NOTIFY", "true")
    assert _switches(tmp_path / "c.yaml", "dry_run: false\n") == (True, False)


def test_guard_settings_carry_both_switches(tmp_path: Path) -> None:
    """The daemon's guard settings take each switch from its own setting."""
    path = tmp_path / "c.yaml"
    path.write_text("dry_run: {notify: false, remediate: true}\naction_budget_per_hour: 7\n")
    guards = load_settings(path).guard_settings()
    assert guards.dry_for(notify=True) is False
    assert guards.dry_for(notify=False) is True
    assert guards.action_budget_per_hour == 7


@pytest.mark.parametrize("own", [True, False])
@pytest.mark.parametrize("notify_dry", [True, False])
@pytest.mark.parametrize("remediate_dry", [True, False])
def test_playbook_dry_run_forces_but_never_lifts(
    own: bool, notify_dry: bool, remediate_dry: bool
) -> None:
    """A playbook's dry_run: true plans every step; false leaves each kind's global switch."""
    settings = GuardSettings(notify_dry_run=notify_dry, remediate_dry_run=remediate_dry)
    guards = Guards(dry_run=own)
    assert step_dry_run(settings, guards, notify=True) is (own or notify_dry)
    assert step_dry_run(settings, guards, notify=False) is (own or remediate_dry)


def test_old_single_switch_still_means_both() -> None:
    """GuardSettings(dry_run=...) alone sets both kinds; a per-kind field overrides it."""
    assert GuardSettings(dry_run=False).dry_for(notify=True) is False
    assert GuardSettings(dry_run=False).dry_for(notify=False) is False
    assert GuardSettings(dry_run=False, notify_dry_run=True).dry_for(notify=True) is True
