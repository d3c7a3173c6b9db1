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
    assert (s.dry_run.notify, s.dry_run.remediate) == (True, True)
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
    assert not s.dry_run.notify and not s.dry_run.remediate and s.targets[0].name == "a"


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


def test_target_url_credentials_move_out_of_name_and_url() -> None:
    """``--target http://user:pass@host:port`` keeps user and password for basic auth only.

    The name, the URL and the ``instance`` label hold no userinfo, and neither repr nor a
    JSON dump of the target shows the password.
    """
    t = target_from_url("http://user:p%40ss@10.0.0.5:8002")
    assert (t.name, t.metrics_url, t.instance) == (
        "10.0.0.5:8002",
        "http://10.0.0.5:8002/metrics",
        "10.0.0.5:8002",
    )
    assert t.basic_auth is not None and t.basic_auth.username == "user"
    assert t.basic_auth.password.get_secret_value() == "p@ss"
    for shown in (repr(t), str(t), t.model_dump_json(), t.name, t.metrics_url):
        assert "p@ss" not in shown and "p%40ss" not in shown


def test_bad_target_url_error_does_not_quote_the_password() -> None:
    """A malformed ``--target`` is named in its one-line error, but without its userinfo."""
    with pytest.raises(SettingsError) as err:
        target_from_url("ftp://user:hunter2@10.0.0.5:8002/metrics")
    assert str(err.value) == (
        "--target 'ftp://10.0.0.5:8002/metrics': "
        "--target must be an http(s) URL such as http://host:8002/metrics"
    )


def test_yaml_metrics_url_credentials_become_basic_auth(tmp_path: Path) -> None:
    """A config file's ``metrics_url`` with user:pass is the same as giving ``basic_auth``."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "targets:\n"
        "  - name: a\n"
        "    metrics_url: http://scraper:hunter2@h:8002/metrics\n"
        "  - name: b\n"
        "    metrics_url: http://h:8003/metrics\n"
        "    basic_auth: {username: scraper, password: hunter2}\n"
    )
    a, b = load_settings(path).targets
    assert a.metrics_url == "http://h:8002/metrics" and a.instance == "h:8002"
    assert a.basic_auth == b.basic_auth
    assert b.basic_auth is not None and b.basic_auth.password.get_secret_value() == "hunter2"
    assert "hunter2" not in repr(a) + repr(b)


def test_credentials_in_url_and_basic_auth_together_are_refused(tmp_path: Path) -> None:
    """Two places for one password is ambiguous: a one-line error names the file and line."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "targets:\n"
        "  - name: a\n"
        "    metrics_url: http://u:pw-first@h:8002/metrics\n"
        "    basic_auth: {username: u, password: pw-second}\n"
    )
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    assert str(err.value) == (
        f"{path}:2: targets.0: metrics_url carries user:password and basic_auth is set too; "
        "keep one of them; fix the value and retry"
    )


def test_leader_election_without_an_api_names_the_file_and_line(tmp_path: Path) -> None:
    """A config asking for leader election with no way to reach Kubernetes fails at start-up."""
    path = tmp_path / "c.yaml"
    path.write_text("dry_run: false\nkube:\n  leader_election: true\n")
    with pytest.raises(SettingsError) as err:
        load_settings(path)
    assert str(err.value).startswith(f"{path}:2: kube: kube.leader_election needs the Kubernetes")


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_alias_bomb_config_is_refused_at_its_line(tmp_path: Path) -> None:
    """A billion-laughs config file stops at the alias past the limit, in file:line style."""
    cfg = tmp_path / "tg.yaml"
    cfg.write_text(LAUGHS)
    with pytest.raises(SettingsError) as err:
        load_settings(cfg)
    assert str(err.value).startswith(f"{cfg}:5: alias *d expands the document past")
    assert "\n" not in str(err.value)


def test_oversized_config_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A config file is a few KB; a huge one (YAML or TOML) is refused by its size."""
    cfg = tmp_path / "tg.toml"
    with cfg.open("wb") as out:
        out.truncate(50 * 1024 * 1024)
    with pytest.raises(SettingsError, match=r"tg.toml:1: config file is 52428800 bytes, over"):
        load_settings(cfg)


def test_yaml_anchors_still_work_and_a_second_document_is_named(tmp_path: Path) -> None:
    """Ordinary anchors and merges load as before; a stray '---' document is an error."""
    cfg = tmp_path / "tg.yaml"
    cfg.write_text(
        "targets:\n"
        "  - &t {name: a, namespace: ml, metrics_url: 'http://a:8002/metrics'}\n"
        "  - {<<: *t, name: b}\n"
    )
    assert [(t.name, t.namespace) for t in load_settings(cfg).targets] == [("a", "ml"), ("b", "ml")]
    cfg.write_text("scrape_interval_s: 5\n---\nscrape_interval_s: 6\n")
    with pytest.raises(SettingsError, match=r"tg.yaml:3: invalid YAML: a second document"):
        load_settings(cfg)
