"""Settings: config files (YAML, TOML), environment, CLI overrides, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonguard.settings import SettingsError, load_settings, split_listen, target_from_url

YAML_CONFIG = """\
targets:
  - name: triton-0
    metrics_url: http://127.0.0.1:8002/metrics
    triton_url: http://127.0.0.1:8000/
    namespace: ml
    pod: triton-0
    access_token: s3cret
scrape_interval_s: 5
prometheus_url: http://127.0.0.1:9090
playbook_dirs: [/etc/tritonguard/playbooks]
slack:
  channel: "#ml-oncall"
kube:
  in_cluster: true
  leader_election: true
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test from an environment without TRITONGUARD_* variables."""
    import os

    for name in list(os.environ):
        if name.startswith("TRITONGUARD_"):
            monkeypatch.delenv(name)


def test_defaults_are_safe() -> None:
    """Without a file or env the daemon is in dry-run with no targets."""
    s = load_settings()
    assert s.dry_run is True
    assert s.targets == []
    assert s.listen == "0.0.0.0:9108"


def test_yaml_file_is_read(tmp_path: Path) -> None:
    """A YAML file sets targets and nested sections; the token stays secret in repr."""
    path = tmp_path / "c.yaml"
    path.write_text(YAML_CONFIG)
    s = load_settings(path)
    (target,) = s.targets
    assert target.triton_url == "http://127.0.0.1:8000"
    assert target.instance == "127.0.0.1:8002"
    assert target.access_token is not None and target.access_token.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)
    assert s.scrape_interval_s == 5.0
    assert s.playbook_dirs == [Path("/etc/tritonguard/playbooks")]
    assert s.slack.channel == "#ml-oncall" and s.kube.leader_election is True


def test_toml_file_is_read(tmp_path: Path) -> None:
    """A .toml file is read the same way."""
    path = tmp_path / "c.toml"
    path.write_text(
        'dry_run = false\n[[targets]]\nname = "a"\nmetrics_url = "http://h:8002/metrics"\n'
    )
    s = load_settings(path)
    assert s.dry_run is False and s.targets[0].name == "a"


def test_env_overrides_file_and_config_path_comes_from_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRITONGUARD_CONFIG names the file; TRITONGUARD_* wins over it, nested with __."""
    path = tmp_path / "c.yaml"
    path.write_text(YAML_CONFIG)
    monkeypatch.setenv("TRITONGUARD_CONFIG", str(path))
    monkeypatch.setenv("TRITONGUARD_SCRAPE_INTERVAL_S", "2.5")
    monkeypatch.setenv("TRITONGUARD_SLACK__TOKEN", "xoxb-1")
    s = load_settings()
    assert s.scrape_interval_s == 2.5
    assert s.slack.token is not None and s.slack.token.get_secret_value() == "xoxb-1"
    # The file's slack.channel survives next to the env's slack.token.
    assert s.slack.channel == "#ml-oncall"
    assert len(s.targets) == 1


def test_overrides_beat_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Command-line overrides win over the environment."""
    monkeypatch.setenv("TRITONGUARD_LISTEN", "0.0.0.0:1")
    assert load_settings(overrides={"listen": "127.0.0.1:2"}).listen == "127.0.0.1:2"


def test_bad_value_in_yaml_names_file_line_and_field(tmp_path: Path) -> None:
    """A bad URL deep in the file is reported as file:line: dotted.path: reason, one line."""
    path = tmp_path / "c.yaml"
    path.write_text(YAML_CONFIG.replace("http://127.0.0.1:8000/", "127.0.0.1:8000"))
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    message = str(err.value)
    assert message.startswith(
        f"{path}:4: targets.0.triton_url: triton_url must be an http(s) URL such as http://host:8000"
    )
    assert "\n" not in message


def test_unknown_key_is_rejected(tmp_path: Path) -> None:
    """A typo in a key is an error, not silently ignored."""
    path = tmp_path / "c.yaml"
    path.write_text("scrape_intervall_s: 3\n")
    with pytest.raises(SettingsError, match=r"c\.yaml:1: scrape_intervall_s: Extra inputs"):
        load_settings(path)


def test_bad_env_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad env value names the variable."""
    monkeypatch.setenv("TRITONGUARD_SCRAPE_TIMEOUT_S", "soon")
    with pytest.raises(SettingsError, match=r"^environment TRITONGUARD_SCRAPE_TIMEOUT_S: "):
        load_settings()


@pytest.mark.parametrize(
    ("text", "suffix", "expected"),
    [
        ("targets: [\n  {name: a,\n", ".yaml", r":3: invalid YAML"),
        ("- just\n- a list\n", ".yaml", r":1: config file must be a mapping"),
        ("dry_run = \n", ".toml", r": invalid TOML"),
        (
            "targets:\n  - name: a\n    metrics_url: http://x/m\n  - name: a\n"
            "    metrics_url: http://y/m\n",
            ".yaml",
            r":1: targets: target names must be unique",
        ),
    ],
)
def test_malformed_files_give_one_line_errors(
    tmp_path: Path, text: str, suffix: str, expected: str
) -> None:
    """Syntax errors, wrong shapes and duplicate names give a one-line reason with location."""
    path = tmp_path / f"c{suffix}"
    path.write_text(text)
    with pytest.raises(SettingsError, match=expected) as err:
        load_settings(path)
    assert "\n" not in str(err.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    """A config path that does not exist says so."""
    with pytest.raises(SettingsError, match="cannot read config file"):
        load_settings(tmp_path / "nope.yaml")


def test_target_from_url_and_listen() -> None:
    """--target URLs get a name and a /metrics path; listen parses host:port and IPv6."""
    t = target_from_url("http://10.0.0.5:8002")
    assert (t.name, t.metrics_url, t.instance) == (
        "10.0.0.5:8002",
        "http://10.0.0.5:8002/metrics",
        "10.0.0.5:8002",
    )
    assert split_listen("[::1]:9108") == ("::1", 9108)
    with pytest.raises(SettingsError, match="--target"):
        target_from_url("10.0.0.5:8002")
    with pytest.raises(ValueError, match="host:port"):
        split_listen("9108")


def test_leader_election_without_an_api_names_the_file_and_line(tmp_path: Path) -> None:
    """A config asking for leader election with no way to reach Kubernetes fails at start-up."""
    path = tmp_path / "c.yaml"
    path.write_text("dry_run: false\nkube:\n  leader_election: true\n")
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    assert str(err.value).startswith(f"{path}:2: kube: kube.leader_election needs the Kubernetes")
