"""Links from an incident to Grafana and Prometheus, built from configurable base URLs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tritonguard.core.findings import IncidentEvent, Subject


class LinkSettings(BaseModel):
    """Where on-call looks next: the Grafana and Prometheus people open in a browser.

    These are the user-facing URLs, which may differ from the in-cluster address the daemon
    queries (``prometheus_url``). Without them a message carries no links.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    grafana_url: str | None = Field(None, description="e.g. https://grafana.example.com")
    grafana_dashboard: str | None = Field(
        None,
        description=(
            "Dashboard path such as /d/triton/triton-models, opened with var-namespace, "
            "var-model and var-pod; without it the link opens Grafana Explore."
        ),
    )
    grafana_datasource: str = Field("prometheus", description="Explore's data source name/uid.")
    prometheus_url: str | None = Field(None, description="e.g. https://prometheus.example.com")
    before_s: float = Field(900.0, ge=0, description="How far before the onset links reach.")

    @field_validator("grafana_url", "prometheus_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL such as https://grafana.example.com")
        return value.rstrip("/")


def _selector(subject: Subject) -> str:
    parts = [f'model="{subject.model}"']
    if subject.namespace:
        parts.append(f'namespace="{subject.namespace}"')
    if subject.pod:
        parts.append(f'pod="{subject.pod}"')
    return "{" + ",".join(parts) + "}"


def queries(subject: Subject) -> dict[str, str]:
    """Return the PromQL that shows where a request's time goes: queue and compute per request."""
    sel = _selector(subject)
    per_request = f"sum(rate(nv_inference_request_success{sel}[1m]))"
    return {
        "queue_us_per_request": (
            f"sum(rate(nv_inference_queue_duration_us{sel}[1m])) / {per_request}"
        ),
        "compute_us_per_request": (
            f"(sum(rate(nv_inference_compute_input_duration_us{sel}[1m]))"
            f" + sum(rate(nv_inference_compute_infer_duration_us{sel}[1m]))"
            f" + sum(rate(nv_inference_compute_output_duration_us{sel}[1m]))) / {per_request}"
        ),
    }


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def links(
    event: IncidentEvent, settings: LinkSettings, until: float | None = None
) -> list[tuple[str, str]]:
    """Return (label, URL) pairs for the incident, from before its onset to ``until``.

    ``until`` None leaves the range open (Grafana's ``now``), as for an incident still open.
    """
    start = event.opened_at - settings.before_s
    out: list[tuple[str, str]] = []
    s = event.subject
    if settings.grafana_url:
        to = "now" if until is None else str(int(until * 1000))
        frm = str(int(start * 1000))
        if settings.grafana_dashboard:
            params = {"var-namespace": s.namespace, "var-model": s.model, "from": frm, "to": to}
            if s.pod:
                params["var-pod"] = s.pod
            path = "/" + settings.grafana_dashboard.lstrip("/")
            out.append(("Grafana", f"{settings.grafana_url}{path}?{urlencode(params)}"))
        else:
            pane = {
                "datasource": settings.grafana_datasource,
                "queries": [
                    {"refId": ref, "expr": expr}
                    for ref, expr in zip("AB", queries(s).values(), strict=True)
                ],
                "range": {"from": frm, "to": to},
            }
            left = quote(json.dumps(pane, separators=(",", ":")))
            out.append(("Grafana", f"{settings.grafana_url}/explore?left={left}"))
    if settings.prometheus_url:
        end = until if until is not None else event.at
        range_s = max(60, int(end - start) + 60)
        params = {}
        for i, expr in enumerate(queries(s).values()):
            params[f"g{i}.expr"] = expr
            params[f"g{i}.tab"] = "0"
            params[f"g{i}.range_input"] = f"{range_s}s"
            params[f"g{i}.end_input"] = _iso(end + 60)
        out.append(("Prometheus", f"{settings.prometheus_url}/graph?{urlencode(params)}"))
    return out
