"""Daemon settings: defaults, a YAML/TOML config file, ``TRITONGUARD_*`` env and CLI overrides."""

from __future__ import annotations

import contextvars
import os
import re
import socket
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from tritonguard.core.engine import EngineConfig
from tritonguard.core.guards import GuardSettings
from tritonguard.core.incident_links import LinkSettings
from tritonguard.core.playbook_model import APPROVER
from tritonguard.core.safe_yaml import DEFAULT_LIMITS, YamlRefused, load_yaml
from tritonguard.core.severity import SeverityRules
from tritonguard.core.shards import MAX_SHARDS, Shard
from tritonguard.core.slack_routing import SlackRoute
from tritonguard.core.slack_templates import SlackTemplates
from tritonguard.core.targets import identity
from tritonguard.core.thresholds import Thresholds
from tritonguard.core.urls import redact_text, split_userinfo
from tritonguard.dry_run_settings import DryRunSettings, expand_boolean

CONFIG_ENV_VAR = "TRITONGUARD_CONFIG"
# Config files load within the same bounds as playbooks (aliases, size, nesting).
YAML_LIMITS = DEFAULT_LIMITS
ENV_PREFIX = "TRITONGUARD_"
# One audit database for the daemon and the CLI: the setting, its environment variable and
# this default are shared, so `tritonguard test --from-incident` finds what `run` wrote.
DEFAULT_AUDIT_DB_PATH = Path("tritonguard-audit.sqlite3")
# The scrape timeout when none is set, unless the interval is shorter (then the interval).
DEFAULT_SCRAPE_TIMEOUT_S = 5.0
AUDIT_DB_ENV = f"{ENV_PREFIX}AUDIT_DB_PATH"

# The parsed config file for the Settings() call in progress. pydantic-settings builds its
# sources inside the class, so the file contents reach it through this context variable.
_FILE_DATA: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "tritonguard_config_file_data", default=None
)


class SettingsError(ValueError):
    """Settings could not be loaded; the message is one line naming the file or variable."""


def _check_http_url(value: str, what: str, example: str = "http://host:8002/metrics") -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{what} must be an http(s) URL such as {example}")
    return value


class BasicAuthSettings(BaseModel):
    """HTTP basic authentication for one metrics endpoint, sent to that endpoint only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    username: str
    password: SecretStr = Field(default=SecretStr(""))


class TargetSettings(BaseModel):
    """One Triton server to watch: where its metrics are and who it is in the cluster.

    Credentials written into ``metrics_url`` (``http://user:pass@host:8002/metrics``) move to
    ``basic_auth`` when the target is built: the URL names the target in logs, labels and
    readiness, and the password must never appear there.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="Short name used in logs and the daemon's metrics.")
    metrics_url: str = Field(description="Full URL of the /metrics endpoint (Triton: port 8002).")
    triton_url: str | None = Field(
        default=None, description="HTTP API base URL (port 8000) for model configs and reloads."
    )
    namespace: str = Field(default="", description="Kubernetes namespace label added to samples.")
    pod: str = Field(default="", description="Pod label added to samples.")
    access_token: SecretStr | None = Field(
        default=None, description="Sent as `triton-access-token` to Triton's restricted APIs."
    )
    honor_labels: bool = Field(
        default=False,
        description="Keep the exporter's own namespace/pod/instance labels (kube-state-metrics).",
    )
    basic_auth: BasicAuthSettings | None = Field(
        default=None,
        description="Sent as HTTP basic authentication to metrics_url (and nowhere else).",
    )

    @model_validator(mode="before")
    @classmethod
    def _credentials_out_of_metrics_url(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("metrics_url"), str):
            return data
        clean, creds = split_userinfo(data["metrics_url"])
        if creds is None:
            return data
        if data.get("basic_auth") is not None:
            raise ValueError(
                "metrics_url carries user:password and basic_auth is set too; keep one of them"
            )
        auth = {"username": creds.username, "password": creds.password}
        return {**data, "metrics_url": clean, "basic_auth": auth}

    @field_validator("metrics_url")
    @classmethod
    def _metrics_url_is_http(cls, value: str) -> str:
        return _check_http_url(value, "metrics_url")

    @field_validator("triton_url")
    @classmethod
    def _triton_url_is_http(cls, value: str | None) -> str | None:
        return (
            None
            if value is None
            else _check_http_url(value, "triton_url", "http://host:8000").rstrip("/")
        )

    @property
    def identity(self) -> tuple[str, str]:
        """Return the (namespace, pod) key its subjects carry: the pod, else ``instance``."""
        return identity(self.namespace, self.pod, self.instance)

    @property
    def instance(self) -> str:
        """Return ``host:port`` of the metrics URL, Prometheus's ``instance`` label."""
        parts = urlsplit(self.metrics_url)
        if parts.port is not None:
            return parts.netloc.rsplit("@", 1)[-1]
        port = 443 if parts.scheme == "https" else 80
        return f"{parts.hostname}:{port}"


class SlackOutboxSettings(BaseModel):
    """How the Slack outbox retries: doubling waits, and when a message is given up."""

    model_config = ConfigDict(extra="forbid")

    retry_initial_s: float = Field(default=1.0, gt=0)
    retry_max_s: float = Field(default=60.0, gt=0)
    give_up_after_s: float = Field(
        default=6 * 3600.0, gt=0, description="A message still undelivered this long is dropped."
    )


class SlackApprovalSettings(BaseModel):
    """Approvals of playbook steps in Slack (buttons, received over Socket Mode)."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(
        default=900.0, gt=0, description="An approval nobody gave in this time expires."
    )
    approvers: list[str] = Field(
        default_factory=list,
        description="Who may approve a step that names nobody: user IDs (U…) or groups (S…).",
    )

    @field_validator("approvers")
    @classmethod
    def _slack_ids(cls, value: list[str]) -> list[str]:
        for who in value:
            if not APPROVER.match(who):
                raise ValueError(
                    f"slack.approvals.approvers: {who!r} is not a Slack user (U…, W…) or "
                    "user-group (S…) ID; Slack says who clicked by ID, never by name"
                )
        return value


class SlackSettings(BaseModel):
    """Where diagnoses are posted, how the threads look, and how they are delivered.

    Without ``token`` every message goes to the console and the structured log instead.
    ``app_token`` (``xapp-…``) turns on Socket Mode for the approval buttons.
    """

    model_config = ConfigDict(extra="forbid")

    token: SecretStr | None = None
    app_token: SecretStr | None = None
    channel: str | None = None
    base_url: str = "https://slack.com/api/"
    routes: list[SlackRoute] = Field(
        default_factory=list,
        description="First match wins: a channel and mentions per namespace, model or severity.",
    )
    mentions: list[str] = Field(
        default_factory=list, description="Mentioned in every root no route gives mentions to."
    )
    links: LinkSettings = Field(default_factory=LinkSettings)
    templates: SlackTemplates = Field(default_factory=SlackTemplates)
    severity: SeverityRules = Field(default_factory=SeverityRules)
    outbox: SlackOutboxSettings = Field(default_factory=SlackOutboxSettings)
    approvals: SlackApprovalSettings = Field(default_factory=SlackApprovalSettings)
    charts: bool = Field(default=True, description="Upload a chart into each thread.")
    chart_minutes: float = Field(default=10.0, gt=0, description="How much history a chart shows.")


class ApiSettings(BaseModel):
    """Who may change the daemon's state over HTTP (the Alertmanager webhook) and how fast.

    Every state-changing endpoint needs ``Authorization: Bearer <token>``; Alertmanager sends
    it with ``http_config.authorization``. The token comes from ``token`` (environment:
    ``TRITONGUARD_API__TOKEN``) or, preferably, ``token_file`` (a mounted Secret, read at
    start-up). Without a token those endpoints are off (404) and the start-up log says so.
    """

    model_config = ConfigDict(extra="forbid")

    token: SecretStr | None = None
    token_file: Path | None = Field(
        default=None, description="File holding the bearer token (a mounted Secret)."
    )
    read_timeout_s: float = Field(
        default=10.0, gt=0, description="A client must send its whole request within this."
    )
    max_body_bytes: int = Field(default=1_048_576, ge=1024, description="Largest request body.")
    max_json_depth: int = Field(
        default=32, ge=2, description="Deeper JSON bodies are refused (400), never recursed into."
    )
    alert_book_max_alerts: int = Field(
        default=10_000, ge=1, description="Firing alerts remembered at most (oldest dropped)."
    )
    alert_book_max_bytes: int = Field(
        default=16 * 1_048_576, ge=65_536, description="Bytes of alert labels remembered at most."
    )

    @model_validator(mode="after")
    def _one_token_source(self) -> ApiSettings:
        if self.token is not None and self.token_file is not None:
            raise ValueError("give api.token or api.token_file, not both")
        return self

    def bearer_token(self) -> str | None:
        """Return the configured token (reading ``token_file``), or None when there is none.

        Raises ValueError naming the file when it cannot be read or is empty.
        """
        if self.token is not None:
            value = self.token.get_secret_value().strip()
            return value or None
        if self.token_file is None:
            return None
        try:
            value = self.token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"api.token_file {self.token_file}: cannot read: {exc}") from None
        if not value:
            raise ValueError(f"api.token_file {self.token_file}: the file is empty")
        return value


class KubeSettings(BaseModel):
    """How the daemon talks to the Kubernetes API and elects a leader among its replicas."""

    model_config = ConfigDict(extra="forbid")

    in_cluster: bool = Field(default=False, description="Use the pod's service account.")
    kubeconfig: Path | None = None
    namespace: str = Field(default="tritonguard", description="Where the leader lease lives.")
    leader_election: bool = Field(
        default=False, description="Only the replica holding the lease runs playbooks."
    )
    lease_name: str = "tritonguard-leader"
    lease_duration_s: float = Field(default=15.0, ge=3)
    identity: str | None = Field(
        default=None, description="This replica's name in the lease; default: the pod's hostname."
    )
    advertise_url: str | None = Field(
        default=None,
        description="Where the other replicas reach this one's HTTP endpoint (the leader "
        "publishes it on its Lease); default: http://$POD_IP:<listen port>.",
    )
    forward_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="A follower gives the leader this long to take a forwarded webhook post.",
    )

    @field_validator("advertise_url")
    @classmethod
    def _advertise_url_is_a_base(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.username is not None
            or parts.query
            or parts.fragment
            or any(c.isspace() for c in value.strip())
        ):
            raise ValueError(
                f"kube.advertise_url must be a base URL such as http://10.0.0.7:9108, got {value!r}"
            )
        return value.strip().rstrip("/")

    def advertised_url(self, listen_port: int, pod_ip: str | None = None) -> str | None:
        """Return this replica's base URL for the others, or None when it cannot be known.

        ``advertise_url`` when set; else the pod's IP (``pod_ip``, or the ``POD_IP``
        environment variable the downward API sets) and the port the daemon listens on.
        """
        if self.advertise_url:
            return self.advertise_url
        ip = (pod_ip if pod_ip is not None else os.environ.get("POD_IP", "")).strip()
        if not ip or listen_port == 0:
            return None
        return f"http://[{ip}]:{listen_port}" if ":" in ip else f"http://{ip}:{listen_port}"

    @model_validator(mode="after")
    def _election_needs_api(self) -> KubeSettings:
        if self.leader_election and not (self.in_cluster or self.kubeconfig is not None):
            raise ValueError(
                "kube.leader_election needs the Kubernetes API: set kube.in_cluster: true "
                "or kube.kubeconfig"
            )
        return self


# A StatefulSet pod's name (its hostname) ends in its ordinal: ``tritonguard-2``.
_ORDINAL = re.compile(r"-(0|[1-9][0-9]*)$")


class ShardSettings(BaseModel):
    """Split the fleet's workloads among several daemons: this daemon is ``index`` of ``count``.

    Each workload (namespace and the Deployment or StatefulSet that owns the pod) belongs to
    one shard by a stable hash (``core.shards``); a daemon scrapes, evaluates and acts only on
    its shard's pods. With ``count`` above 1 and no ``index``, the index is the ordinal at the
    end of ``kube.identity`` or the hostname modulo ``count``, as a StatefulSet names its pods
    (of 3 shards, ``tritonguard-2`` is shard 2 and ``tritonguard-5`` its second replica). Each
    shard's replicas elect their own leader, on ``<kube.lease_name>-shard-<index>``.
    """

    model_config = ConfigDict(extra="forbid")

    count: int = Field(default=1, ge=1, le=MAX_SHARDS, description="How many shards there are.")
    index: int | None = Field(
        default=None,
        ge=0,
        description="This daemon's shard; unset: the StatefulSet ordinal in the hostname.",
    )

    @property
    def shard(self) -> Shard:
        """Return the shard, once settings have resolved the index."""
        return Shard(self.index or 0, self.count)


def shard_lease_name(lease_name: str, index: int) -> str:
    """Return the Lease a shard's replicas elect their leader on."""
    suffix = f"-shard-{index}"
    return lease_name if lease_name.endswith(suffix) else lease_name + suffix


# ``discovery.namespaces`` meaning every namespace.
ALL_NAMESPACES = "*"


class DiscoverySettings(BaseModel):
    """Find Triton pods through the Kubernetes API: scrape them and reach their HTTP API.

    Off while ``namespaces`` is empty. Pods matching ``label_selector`` in each namespace are
    followed with a watch; a pod is a target while it is Running and ready and has an IP. Its
    ports are the container ports named ``metrics_port``/``http_port`` (or numbers), unless the
    pod's annotations ``tritonguard.io/metrics-port``/``tritonguard.io/http-port`` say
    otherwise. With ``scrape: false`` (when Prometheus already scrapes the pods) discovery only
    tells actions and model-config reads where each pod's Triton API is.

    ``namespaces: ["*"]`` watches every namespace with one watch (it needs a ClusterRole:
    ``deploy/components/all-namespaces``). Discovered Tritons whose repository API is behind
    ``--http-restricted-api`` get ``triton_access_token`` (or, preferably,
    ``triton_access_token_file``, a mounted Secret read at start-up) as their
    ``triton-access-token`` header; one token for all of them, as one platform team runs them.
    """

    model_config = ConfigDict(extra="forbid")

    namespaces: list[str] = Field(
        default_factory=list, description='Namespaces to watch; ["*"]: every namespace.'
    )
    triton_access_token: SecretStr | None = Field(
        default=None, description="Sent as `triton-access-token` to every discovered Triton."
    )
    triton_access_token_file: Path | None = Field(
        default=None, description="File holding that token (a mounted Secret)."
    )
    label_selector: str = Field(default="app=triton", description="Which pods are Tritons.")
    metrics_port: str = Field(default="metrics", min_length=1)
    http_port: str = Field(default="http", min_length=1)
    metrics_path: str = Field(default="/metrics", min_length=1)
    scrape: bool = Field(default=True, description="Scrape discovered pods directly.")
    resolve_owners: bool = Field(
        default=True, description="Read each ReplicaSet's owner to name the Deployment."
    )
    watch_timeout_s: int = Field(default=300, ge=5, description="One watch request's length.")
    watch_config_maps: bool = Field(
        default=False,
        description=(
            "Watch the ConfigMaps Triton pods mount (a model repository) and name a change of "
            "their data before an incident. Needs configmaps get/list/watch in the watched "
            "namespaces: deploy/components/config-maps grants them."
        ),
    )
    stale_after_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "A namespace whose watch has failed this long is stale: discovery is not ready "
            "and actions do not use its pods' endpoints until it recovers."
        ),
    )

    @property
    def enabled(self) -> bool:
        """Return whether any namespace is watched."""
        return bool(self.namespaces)

    @property
    def all_namespaces(self) -> bool:
        """Return whether every namespace is watched (``namespaces: ["*"]``)."""
        return self.namespaces == [ALL_NAMESPACES]

    @field_validator("namespaces")
    @classmethod
    def _namespaces_distinct(cls, value: list[str]) -> list[str]:
        if any(not ns.strip() for ns in value):
            raise ValueError("a namespace name cannot be empty")
        if ALL_NAMESPACES in value and len(set(value)) > 1:
            raise ValueError('"*" watches every namespace; list no other namespace with it')
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _one_token_source(self) -> DiscoverySettings:
        if self.triton_access_token is not None and self.triton_access_token_file is not None:
            raise ValueError(
                "give discovery.triton_access_token or discovery.triton_access_token_file, not both"
            )
        if self.all_namespaces and (
            self.triton_access_token is not None or self.triton_access_token_file is not None
        ):
            # Anyone allowed to create a pod with the selector's labels in any namespace would
            # receive the platform's repository-API token on the first config read.
            raise ValueError(
                'discovery.namespaces ["*"] with a Triton access token would send the token to '
                "every pod matching the label selector in any namespace; list the namespaces "
                "whose Tritons share the token instead"
            )
        return self

    def access_token(self) -> SecretStr | None:
        """Return the token for discovered Tritons (reading the file), or None.

        Raises ValueError naming the file when it cannot be read or is empty.
        """
        if self.triton_access_token is not None:
            return self.triton_access_token
        path = self.triton_access_token_file
        if path is None:
            return None
        try:
            value = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(
                f"discovery.triton_access_token_file {path}: cannot read: {exc}"
            ) from None
        if not value:
            raise ValueError(f"discovery.triton_access_token_file {path}: the file is empty")
        return SecretStr(value)


class Settings(BaseSettings):
    """Everything the daemon needs; precedence: CLI > environment > config file > defaults."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    targets: list[TargetSettings] = Field(default_factory=list)
    scrape_interval_s: float = Field(default=15.0, gt=0)
    scrape_timeout_s: float = Field(
        default=DEFAULT_SCRAPE_TIMEOUT_S,
        gt=0,
        description=(
            "At most scrape_interval_s, as Prometheus requires; unset, it is 5 s or the "
            "interval if that is shorter."
        ),
    )
    scrape_jitter_s: float = Field(default=1.0, ge=0)
    max_concurrent_scrapes: int = Field(default=32, ge=1)
    prometheus_url: str | None = None
    prometheus_timeout_s: float = Field(default=10.0, gt=0)
    prometheus_interval_s: float = Field(default=15.0, gt=0)
    prometheus_backfill_s: float = Field(
        default=300.0, ge=0, description="History read from Prometheus on the first tick."
    )
    prometheus_mode: Literal["raw", "features"] = Field(
        default="raw",
        description=(
            "raw: read Triton's and the exporters' series and compute features and causes "
            "here. features: read the exported rules' recorded features "
            "(tritonguard:<feature>), one instant query per feature for the whole fleet, "
            "and open incidents from their alerts (the Alertmanager webhook); nothing is "
            "scraped, and targets only tell actions where each Triton API is."
        ),
    )
    prometheus_max_response_mb: float = Field(
        default=64.0,
        gt=0,
        description=(
            "features mode: one query's answer larger than this fails the whole read, so a "
            "runaway series count cannot take the daemon's memory."
        ),
    )
    evaluation_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="Evaluate at least this often; the daemon also evaluates on each scrape.",
    )
    evaluation_min_gap_s: float = Field(
        default=1.0,
        ge=0,
        description=(
            "...and at most this often: with many targets scrapes arrive continuously, and one "
            "evaluation a second already sees each 2 s scrape."
        ),
    )
    model_config_refresh_s: float = Field(default=300.0, gt=0)
    triton_timeout_s: float = Field(default=5.0, gt=0)
    playbook_dirs: list[Path] = Field(default_factory=list)
    dry_run: DryRunSettings = Field(
        default_factory=DryRunSettings,
        description=(
            "notify / remediate: which kinds of step only plan; a bare true|false sets both."
        ),
    )
    action_budget_per_hour: int = Field(
        default=20,
        ge=1,
        description="Daemon-wide cap on playbook runs in any hour, across all playbooks.",
    )
    audit_db_path: Path = DEFAULT_AUDIT_DB_PATH
    memory_budget_mb: float = Field(
        default=384.0,
        ge=32,
        description=(
            "Memory the daemon's series store and flight recorder may use together; set it "
            "below the pod's memory limit (the shipped deployment: 384 of 512 Mi)."
        ),
    )
    listen: str = "0.0.0.0:9108"
    shutdown_grace_s: float = Field(default=20.0, gt=0)
    log_level: str = "info"
    slack: SlackSettings = Field(default_factory=SlackSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    kube: KubeSettings = Field(default_factory=KubeSettings)
    discovery: DiscoverySettings = Field(default_factory=DiscoverySettings)
    shard: ShardSettings = Field(default_factory=ShardSettings)
    thresholds: Thresholds = Field(
        default_factory=Thresholds,
        description="Engine thresholds (daemon/tritonguard/core/thresholds.py).",
    )

    def engine_config(self) -> EngineConfig:
        """Return the engine's settings: the thresholds and its part of the memory budget.

        The engine (series and baselines) gets three quarters of ``memory_budget_mb``, the
        flight recorder the rest (:meth:`recorder_budget_bytes`). With charts on, the store
        keeps points as far back as a chart shows.
        """
        budget = int(self.memory_budget_mb * 1024 * 1024)
        return EngineConfig(
            thresholds=self.thresholds,
            memory_budget_bytes=budget * 3 // 4,
            history_s=self.slack.chart_minutes * 60.0 if self.slack.charts else 0.0,
        )

    def guard_settings(self) -> GuardSettings:
        """Return the playbook guards' daemon-wide settings: both dry-run switches, the budget."""
        return GuardSettings(
            notify_dry_run=self.dry_run.notify,
            remediate_dry_run=self.dry_run.remediate,
            action_budget_per_hour=self.action_budget_per_hour,
        )

    def recorder_budget_bytes(self) -> int:
        """Return the flight recorder's part of the memory budget."""
        return int(self.memory_budget_mb * 1024 * 1024) // 4

    @model_validator(mode="before")
    @classmethod
    def _default_timeout_within_interval(cls, data: Any) -> Any:
        """Without a scrape timeout, a shorter interval is the timeout (Prometheus's default)."""
        if not isinstance(data, dict) or data.get("scrape_timeout_s") is not None:
            return data
        try:
            interval = float(data["scrape_interval_s"])
        except (KeyError, TypeError, ValueError):  # the default, or refused by the field
            return data
        if 0 < interval < DEFAULT_SCRAPE_TIMEOUT_S:
            return {**data, "scrape_timeout_s": data["scrape_interval_s"]}
        return data

    @field_validator("scrape_timeout_s")
    @classmethod
    def _timeout_within_interval(cls, value: float, info: ValidationInfo) -> float:
        # One poll scrapes every target and the next starts an interval after the last
        # began: a timeout above the interval lets one slow target stretch every target's
        # interval to the timeout. Prometheus refuses the same setting at load.
        interval = info.data.get("scrape_interval_s")
        if isinstance(interval, float) and value > interval:
            raise ValueError(
                f"{value:g} s is above scrape_interval_s ({interval:g} s), which Prometheus "
                "refuses too: a slow target would delay every target's next scrape; lower "
                f"scrape_timeout_s to {interval:g} or less, or raise scrape_interval_s"
            )
        return value

    @field_validator("prometheus_url")
    @classmethod
    def _prometheus_url_is_http(cls, value: str | None) -> str | None:
        return (
            None
            if value is None
            else _check_http_url(value, "prometheus_url", "http://prometheus:9090").rstrip("/")
        )

    @field_validator("listen")
    @classmethod
    def _listen_is_host_port(cls, value: str) -> str:
        split_listen(value)
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level_is_known(cls, value: str) -> str:
        level = value.lower()
        if level not in ("debug", "info", "warning", "error", "critical"):
            raise ValueError("log_level must be one of debug, info, warning, error, critical")
        return level

    @model_validator(mode="after")
    def _features_need_prometheus(self) -> Settings:
        if self.prometheus_mode == "features" and not self.prometheus_url:
            raise ValueError(
                "prometheus_mode: features reads the recorded features from Prometheus: "
                "set prometheus_url (Prometheus, Thanos Query or Mimir's Prometheus API)"
            )
        return self

    @model_validator(mode="after")
    def _discovery_needs_api(self) -> Settings:
        k = self.kube
        if self.discovery.enabled and not (k.in_cluster or k.kubeconfig is not None):
            raise ValueError(
                "discovery.namespaces needs the Kubernetes API: set kube.in_cluster: true "
                "or kube.kubeconfig"
            )
        return self

    @model_validator(mode="after")
    def _shard_resolved(self) -> Settings:
        """Resolve the shard index (from the StatefulSet ordinal) and name the shard's Lease."""
        shard = self.shard
        if shard.count == 1:
            if shard.index not in (None, 0):
                raise ValueError(
                    f"shard.index is {shard.index} but shard.count is 1; set shard.count to "
                    "the number of shards"
                )
            return self
        index = shard.index
        if index is None:
            host = self.kube.identity or socket.gethostname()
            match = _ORDINAL.search(host)
            if match is None:
                raise ValueError(
                    f"shard.count is {shard.count} but shard.index is not set, and the name "
                    f"{host!r} ends in no StatefulSet ordinal; set shard.index "
                    "(TRITONGUARD_SHARD__INDEX) or run the shards as a StatefulSet"
                )
            # Replicas beyond the count are further replicas of the same shards: ordinal 3 of
            # 3 shards is a second replica of shard 0, electing on shard 0's Lease.
            index = int(match[1]) % shard.count
        if index >= shard.count:
            raise ValueError(
                f"shard.index is {index} but shard.count is {shard.count}, so shards are 0 to "
                f"{shard.count - 1}; set shard.count to the number of replicas"
            )
        self.shard = shard.model_copy(update={"index": index})
        self.kube = self.kube.model_copy(
            update={"lease_name": shard_lease_name(self.kube.lease_name, index)}
        )
        return self

    @field_validator("targets")
    @classmethod
    def _target_names_unique(cls, value: list[TargetSettings]) -> list[TargetSettings]:
        names = [t.name for t in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"target names must be unique; repeated: {', '.join(dupes)}")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Put the config file below the environment, and ignore .env and secrets dirs."""
        file_data = _FILE_DATA.get() or {}
        return (init_settings, env_settings, InitSettingsSource(settings_cls, file_data))


def split_listen(listen: str) -> tuple[str, int]:
    """Split ``host:port`` (``[::1]:9108`` for IPv6); raise ValueError if malformed."""
    host, sep, port_text = listen.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"listen must be host:port such as 0.0.0.0:9108, got {listen!r}")
    return host.strip("[]") or "0.0.0.0", int(port_text)


def target_from_url(url: str, *, namespace: str = "", pod: str = "") -> TargetSettings:
    """Build a target from a bare metrics URL (``--target``); the name is its ``host:port``.

    Credentials in the URL (``http://user:pass@host:8002``) are kept for basic authentication
    of that target and left out of its name.
    """
    try:
        _check_http_url(url, "--target")
    except ValueError as exc:
        raise SettingsError(f"--target {redact_text(url)!r}: {exc}") from None
    parts = urlsplit(url)
    metrics_url = url if parts.path not in ("", "/") else url.rstrip("/") + "/metrics"
    name = parts.netloc.rpartition("@")[2]
    return TargetSettings(name=name, metrics_url=metrics_url, namespace=namespace, pod=pod)


def _yaml_node_line(root: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
    """Return the 1-based line of the YAML node at ``loc``, or the deepest ancestor found."""
    node = root
    line = None if node is None else node.start_mark.line + 1
    for key in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(key):
                    child = value_node
                    line = key_node.start_mark.line + 1
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(key, int)
            and 0 <= key < len(node.value)
        ):
            child = node.value[key]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def _read_config_file(path: Path) -> tuple[dict[str, Any], yaml.Node | None]:
    """Parse a YAML or TOML config file into a mapping plus the YAML node tree (for lines)."""
    limit = YAML_LIMITS.max_chars
    try:
        # Checked before reading: a config file is a few KB, and a huge one (or a device)
        # must not be read into memory to be refused afterwards.
        size = path.stat().st_size
        if size > limit:
            raise SettingsError(
                f"{path}:1: config file is {size} bytes, over the limit of {limit}; "
                "is this the right file?"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read config file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{path}: config file is not UTF-8 text") from None
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(text), None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{path}: invalid TOML: {exc}") from None
    try:
        docs = load_yaml(text, str(path), YAML_LIMITS)
        if len(docs) > 1:
            second = docs[1].node.start_mark.line + 1
            raise SettingsError(
                f"{path}:{second}: invalid YAML: a second document; a config file is one "
                "document, remove the '---' or the rest"
            )
        node = docs[0].node if docs else None
        data = docs[0].data() if docs else None
    except YamlRefused as exc:
        raise SettingsError(f"{path}:{exc.line}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SettingsError(f"{where}: invalid YAML: {problem}") from None
    if data is None:
        return {}, node
    if not isinstance(data, dict):
        raise SettingsError(f"{path}:1: config file must be a mapping of setting names to values")
    return data, node


def _describe_error(
    exc: ValidationError, path: Path | None, node: yaml.Node | None, file_keys: set[str]
) -> str:
    """Turn the first validation error into one line naming where the bad value came from."""
    err = exc.errors()[0]
    loc = [part for part in err["loc"] if isinstance(part, int | str)]
    dotted = ".".join(str(part) for part in loc) or "settings"
    message = err["msg"].removeprefix("Value error, ")
    top = str(loc[0]) if loc else ""
    env_name = ENV_PREFIX + top.upper()
    if top and any(name.upper().startswith(env_name) for name in os.environ):
        where = f"environment {env_name}"
    elif path is not None and top in file_keys:
        line = _yaml_node_line(node, loc)
        where = f"{path}:{line}" if line is not None else str(path)
    else:
        where = "settings"
    more = len(exc.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{where}: {dotted}: {message}{suffix}; fix the value and retry"


@contextmanager
def _file_data(data: dict[str, Any]) -> Iterator[None]:
    token = _FILE_DATA.set(data)
    try:
        yield
    finally:
        _FILE_DATA.reset(token)


def load_settings(
    config_path: Path | str | None = None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Load settings from ``config_path`` (or ``$TRITONGUARD_CONFIG``), env and overrides.

    Raises SettingsError with a one-line message naming the file, line or variable at fault.
    """
    raw_path = config_path if config_path is not None else os.environ.get(CONFIG_ENV_VAR)
    path = Path(raw_path) if raw_path else None
    data: dict[str, Any] = {}
    node: yaml.Node | None = None
    if path is not None:
        data, node = _read_config_file(path)
        data = expand_boolean(data)
    clean_overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    try:
        with _file_data(data):
            return Settings(**clean_overrides)
    except ValidationError as exc:
        raise SettingsError(_describe_error(exc, path, node, set(data))) from None
    except ValueError as exc:
        # pydantic-settings reports malformed JSON in complex env values as a plain ValueError.
        raise SettingsError(f"environment: {str(exc).splitlines()[0]}") from None
