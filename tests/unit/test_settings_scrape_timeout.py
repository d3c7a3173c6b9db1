"""The scrape timeout never exceeds the scrape interval, as Prometheus requires."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tritonguard.settings import DEFAULT_SCRAPE_TIMEOUT_S, SettingsError, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test from an environment without TRITONGUARD_* variables."""
    for name in list(os.environ):
        if name.startswith("TRITONGUARD_"):
            monkeypatch.delenv(name)


def test_a_timeout_above_the_interval_is_refused_in_one_line_naming_both(tmp_path: Path) -> None:
    """The file's line, both values and what to do; nothing after it starts."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text("scrape_interval_s: 2\nscrape_timeout_s: 3\n")
    with pytest.raises(SettingsError) as refused:
        load_settings(cfg)
    assert str(refused.value) == (
        f"{cfg}:2: scrape_timeout_s: 3 s is above scrape_interval_s (2 s), which Prometheus "
        "refuses too: a slow target would delay every target's next scrape; lower "
        "scrape_timeout_s to 2 or less, or raise scrape_interval_s; fix the value and retry"
    )


def test_the_refusal_names_the_environment_variable_that_set_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A timeout from the environment is blamed on the variable, the interval's origin aside."""
    monkeypatch.setenv("TRITONGUARD_SCRAPE_TIMEOUT_S", "20")
    with pytest.raises(SettingsError, match=r"^environment TRITONGUARD_SCRAPE_TIMEOUT_S: .*20 s"):
        load_settings()


def test_a_timeout_equal_to_the_interval_is_allowed() -> None:
    """Prometheus allows the timeout to be the whole interval; so does the daemon."""
    s = load_settings(overrides={"scrape_interval_s": 0.25, "scrape_timeout_s": 0.25})
    assert s.scrape_timeout_s == s.scrape_interval_s == 0.25


@pytest.mark.parametrize(
    ("interval", "timeout"),
    [(15.0, DEFAULT_SCRAPE_TIMEOUT_S), (2.0, 2.0), (0.5, 0.5), (5.0, 5.0)],
)
def test_an_unset_timeout_is_five_seconds_or_the_interval_if_shorter(
    interval: float, timeout: float
) -> None:
    """Prometheus's rule for an unset timeout: a short interval is not refused, it is the timeout."""
    s = load_settings(overrides={"scrape_interval_s": interval})
    assert s.scrape_timeout_s == timeout


def test_the_defaults_hold_together() -> None:
    """15 s scrapes with a 5 s timeout, as the shipped deploy/ config has them."""
    s = load_settings()
    assert (s.scrape_interval_s, s.scrape_timeout_s) == (15.0, 5.0)
