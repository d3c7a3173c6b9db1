"""Sandboxed templating of playbook parameters from incident fields, with load-time checking."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jinja2
import jinja2.meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tritonguard.core.findings import IncidentEvent

# The only names a template may use. Anything else is an error when the playbook loads.
TEMPLATE_NAMES: frozenset[str] = frozenset(
    {
        "model",
        "pod",
        "namespace",
        "cause",
        "confidence",
        "incident_id",
        "summary",
        "evidence",
        "held_for_s",
    }
)

_ENV = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)


class TemplateError(ValueError):
    """A template is malformed, uses a name it may not, or failed to render."""


def is_template(text: str) -> bool:
    """Return True when ``text`` contains template markup."""
    return "{{" in text or "{%" in text or "{#" in text


def check_template(text: str, names: frozenset[str] = TEMPLATE_NAMES) -> None:
    """Raise TemplateError when ``text`` does not parse or uses names outside ``names``."""
    try:
        ast = _ENV.parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message}") from None
    unknown = sorted(jinja2.meta.find_undeclared_variables(ast) - names)
    if unknown:
        raise TemplateError(
            f"template uses unknown name(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(names))}"
        )


def incident_context(event: IncidentEvent, now: float | None = None) -> dict[str, Any]:
    """Return the template variables of an incident: subject, cause, confidence, evidence."""
    at = event.at if now is None else now
    return {
        "model": event.subject.model,
        "pod": event.subject.pod,
        "namespace": event.subject.namespace,
        "cause": event.cause,
        "confidence": event.confidence,
        "incident_id": event.incident_id,
        "summary": event.summary,
        # Unknown evidence stays absent so that StrictUndefined reports it rather than rendering 0.
        "evidence": {k: v.value for k, v in event.evidence.items() if v.value is not None},
        "held_for_s": max(0.0, at - event.opened_at),
    }


def render_string(text: str, context: Mapping[str, Any]) -> str:
    """Render one template string; raise TemplateError with a one-line reason on failure."""
    if not is_template(text):
        return text
    try:
        return _ENV.from_string(text).render(dict(context))
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"template {text!r}: {exc.message}") from None
    except jinja2.TemplateError as exc:
        raise TemplateError(f"template {text!r}: {exc}") from None
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise TemplateError(f"template {text!r}: {exc}") from None


def render_value(value: Any, context: Mapping[str, Any]) -> Any:
    """Render every string inside a JSON-like value (dict keys included); other leaves are kept."""
    if isinstance(value, str):
        return render_string(value, context)
    if isinstance(value, Mapping):
        return {render_string(str(k), context): render_value(v, context) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render_value(v, context) for v in value]
    return value


def template_leaves(
    value: Any, path: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], str]]:
    """Return (path, text) for every string leaf of ``value`` that holds template markup."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(value, str):
        if is_template(value):
            out.append((path, value))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            out.extend(template_leaves(v, (*path, str(k))))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            out.extend(template_leaves(v, (*path, i)))
    return out
