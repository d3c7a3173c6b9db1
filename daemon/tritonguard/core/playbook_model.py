"""Playbook schema (pydantic) and YAML loading that reports every problem as ``file:line:col``."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails
from yaml.constructor import SafeConstructor

from tritonguard.core.findings import CAUSES, IncidentEvent
from tritonguard.core.safe_yaml import YamlRefused, load_yaml
from tritonguard.core.templating import TemplateError, check_template, template_leaves

Loc = tuple[str | int, ...]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """Return seconds for ``30s``, ``5m``, ``1h``, ``250ms`` or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like 30s, 5m, 1h")
    if isinstance(value, int | float):
        # YAML's .nan and .inf are floats too; a NaN cooldown or timeout compares false with
        # everything and would silently switch its guard off.
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("a duration must be a finite number of seconds")
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _UNIT_S[m.group(2)]
    raise ValueError(f"{value!r} is not a duration; write e.g. 30s, 5m, 1h or 250ms")


# The schema says what the files may hold (a number of seconds or a string with a unit), not
# the float the model turns them into, so editors accept the shipped playbooks.
DURATION_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s|m|h|d)?\s*$"},
    ],
    "description": "seconds, or a duration such as 30s, 5m, 1h, 250ms",
}

Duration = Annotated[
    float, BeforeValidator(parse_duration), WithJsonSchema(DURATION_SCHEMA, mode="validation")
]
"""Seconds, written in YAML as ``30s``, ``5m``, ``1h``, ``250ms`` or a number."""

SLUG = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
# Slack IDs of who may approve: users (U…, W… on Enterprise Grid) and user groups (S…).
APPROVER = re.compile(r"^[UWS][A-Z0-9]{2,}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Matchers(_Strict):
    """Regular expressions (full match) on the incident's subject; an absent matcher matches all."""

    namespace: str | None = None
    model: str | None = None
    pod: str | None = None

    @field_validator("namespace", "model", "pod")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    def matches(self, namespace: str, model: str, pod: str) -> bool:
        """Return True when every present matcher fully matches its label."""
        for pattern, value in ((self.namespace, namespace), (self.model, model), (self.pod, pod)):
            if pattern is not None and re.fullmatch(pattern, value) is None:
                return False
        return True


class When(_Strict):
    """When a playbook runs: which causes or alerts, how sure, how long held, on which subjects."""

    causes: list[str] = Field(default_factory=list, description="cause ids from the catalogue")
    alerts: list[str] = Field(default_factory=list, description="Alertmanager alert names")
    min_confidence: float = Field(0.0, ge=0.0, le=1.0)
    held_for: Duration = Field(0.0, description="how long the incident must have been open")
    match: Matchers = Field(default_factory=Matchers)

    @field_validator("causes")
    @classmethod
    def _known_causes(cls, value: list[str]) -> list[str]:
        for cause in value:
            if cause not in CAUSES:
                raise ValueError(f"unknown cause {cause!r}; use one of {', '.join(CAUSES)}")
        return value

    @model_validator(mode="after")
    def _something(self) -> When:
        if not self.causes and not self.alerts:
            raise ValueError("a playbook needs when.causes or when.alerts; otherwise it never runs")
        return self


class BoundSpec(_Strict):
    """Inclusive limits for one numeric value a playbook may change."""

    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> BoundSpec:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class Guards(_Strict):
    """Limits on how often and how far a playbook may act. Dry-run is on until turned off."""

    dry_run: bool = Field(True, description="plan only; set false to let the playbook act")
    cooldown: Duration = Field(900.0, description="minimum time between runs per subject")
    max_runs_per_hour: int = Field(4, ge=1)
    bounds: dict[str, BoundSpec] = Field(
        default_factory=dict,
        description="limits per config path (instance_group[*].count) or 'replicas'",
    )


class Step(_Strict):
    """One action with its parameters; strings in params may be templates.

    ``approval: required`` makes the step wait for a human's yes in Slack before it runs
    (playbooks.md, "Approvals"); ``approvers`` names who may give it, else the daemon's
    ``slack.approvals.approvers``.
    """

    action: str
    params: dict[str, Any] = Field(default_factory=dict)
    name: str | None = None
    approval: Literal["required"] | None = Field(
        None, description="'required': the step waits for an approval in Slack before it runs"
    )
    approvers: list[str] = Field(
        default_factory=list,
        description="Slack user (U…, W…) or user-group (S…) IDs who may approve this step",
    )
    approval_timeout: Duration | None = Field(
        None, description="how long the approval waits (default: slack.approvals.timeout_s)"
    )

    @field_validator("approvers")
    @classmethod
    def _slack_ids(cls, value: list[str]) -> list[str]:
        for who in value:
            if not APPROVER.match(who):
                raise ValueError(
                    f"{who!r} is not a Slack user (U…, W…) or user-group (S…) ID; Slack "
                    "identifies who clicked by ID, never by name"
                )
        return value

    @field_validator("approval_timeout")
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError("must be above 0; an approval that expires at once never runs")
        return value

    @model_validator(mode="after")
    def _approval_fields(self) -> Step:
        if self.approval is None and (self.approvers or self.approval_timeout is not None):
            raise ValueError(
                "approvers and approval_timeout need approval: required; add it or remove them"
            )
        return self

    @property
    def needs_approval(self) -> bool:
        """Whether a real run of the step waits for a human's approval."""
        return self.approval == "required"


class Playbook(_Strict):
    """A remediation playbook: when it runs, its guards, its steps, verification and rollback."""

    name: str
    description: str = ""
    when: When
    guards: Guards = Field(default_factory=Guards)
    steps: list[Step] = Field(min_length=1)
    verify: dict[str, Any] | None = Field(
        None, description="parameters of a final 'verify' step (wait, checks)"
    )
    rollback: list[Step] | None = Field(
        None, description="steps run when a step or verify fails; default: undo completed steps"
    )
    escalate: list[Step] = Field(default_factory=list, description="steps run after a rollback")
    source: str = Field("", exclude=True, description="file:line the playbook was loaded from")

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG.match(value):
            raise ValueError(
                "name must be lower-case letters, digits, '-', '_' or '.', up to 63 chars"
            )
        return value

    def all_steps(self) -> list[Step]:
        """Return the steps followed by the verify step, in the order they run."""
        if self.verify is None:
            return list(self.steps)
        return [*self.steps, Step(action="verify", params=self.verify)]

    def matches(self, event: IncidentEvent, alerts: frozenset[str] = frozenset()) -> str | None:
        """Return None when the playbook applies to ``event``, else the reason it does not."""
        w = self.when
        if event.cause not in w.causes and not (alerts & set(w.alerts)):
            return "cause not selected"
        if event.confidence < w.min_confidence:
            return f"confidence {event.confidence:.2f} < min_confidence {w.min_confidence:.2f}"
        s = event.subject
        if not w.match.matches(s.namespace, s.model, s.pod):
            return "subject does not match when.match"
        return None


class Refusal(str):
    """A problem line for input refused outright (too large to load), not merely invalid.

    It is a ``str`` so that it keeps this mark when gathered with other files' problems into
    a new PlaybookError; commands exit 2 (bad input) rather than 1 when one is present.
    """

    __slots__ = ()


class PlaybookError(ValueError):
    """One or more problems in playbook files, each a ``file:line:col: problem; fix`` line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems

    @property
    def refused(self) -> bool:
        """Tell whether any problem is a Refusal (input too large to load at all)."""
        return any(isinstance(p, Refusal) for p in self.problems)


@dataclass(slots=True)
class LocatedDocument:
    """A parsed YAML document and the 1-based (line, column) of every node, keyed by path."""

    data: Any
    marks: dict[Loc, tuple[int, int]]
    source: str
    key_marks: dict[Loc, tuple[int, int]] = field(default_factory=dict)

    def where(self, loc: Loc) -> str:
        """Return ``file:line:col`` of the deepest known node on ``loc``."""
        for n in range(len(loc), -1, -1):
            mark = self.marks.get(tuple(loc[:n]))
            if mark is not None:
                return f"{self.source}:{mark[0]}:{mark[1]}"
        return f"{self.source}:1:1"

    def where_key(self, loc: Loc) -> str:
        """Return ``file:line:col`` of the key that names ``loc`` (for unknown fields)."""
        mark = self.key_marks.get(tuple(loc))
        return f"{self.source}:{mark[0]}:{mark[1]}" if mark else self.where(loc)

    def where_error(self, loc: Loc, kind: str) -> str:
        """Return the position to blame for a validation error of type ``kind`` at ``loc``."""
        return self.where_key(loc) if kind == "extra_forbidden" else self.where(loc)


def _convert(node: yaml.Node, loc: Loc, doc: LocatedDocument, loader: SafeConstructor) -> Any:
    doc.marks[loc] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) or key is None:
                where = (
                    f"{doc.source}:{key_node.start_mark.line + 1}:{key_node.start_mark.column + 1}"
                )
                raise PlaybookError([f"{where}: a mapping key must be a plain value; quote it"])
            skey = str(key)
            if skey in out:
                where = (
                    f"{doc.source}:{key_node.start_mark.line + 1}:{key_node.start_mark.column + 1}"
                )
                raise PlaybookError([f"{where}: duplicate key {skey!r}; keep only one"])
            doc.key_marks[(*loc, skey)] = (
                key_node.start_mark.line + 1,
                key_node.start_mark.column + 1,
            )
            out[skey] = _convert(value_node, (*loc, skey), doc, loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*loc, i), doc, loader) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def load_yaml_documents(text: str, source: str) -> list[LocatedDocument]:
    """Parse every YAML document in ``text``, keeping each node's position; raise PlaybookError.

    Texts past the bounds of ``safe_yaml`` (alias bombs, huge or deeply nested documents) are
    refused with one ``Refusal`` line.
    """
    docs: list[LocatedDocument] = []
    try:
        for composed in load_yaml(text, source):
            doc = LocatedDocument(None, {}, source)
            doc.data = _convert(composed.node, (), doc, composed.constructor)
            docs.append(doc)
    except YamlRefused as exc:
        raise PlaybookError([Refusal(str(exc))]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else f"{source}:1:1"
        raise PlaybookError(
            [f"{where}: YAML syntax error: {exc.problem or exc.context}; fix the YAML"]
        ) from None
    except yaml.YAMLError as exc:
        raise PlaybookError([f"{source}:1:1: YAML error: {exc}; fix the YAML"]) from None
    return docs


def describe_error(err: ErrorDetails) -> str:
    """Turn one pydantic error into ``problem; what to do``."""
    kind = err["type"]
    loc = err["loc"]
    field = str(loc[-1]) if loc else "value"
    if kind == "missing":
        return f"missing required field {field!r}; add it"
    if kind == "extra_forbidden":
        return f"unknown field {field!r}; remove it or fix its spelling"
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    shown = json.dumps(err.get("input"), default=str)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{field}: {msg} (got {shown}); fix the value"


def _errors(doc: LocatedDocument, exc: ValidationError, prefix: Loc = ()) -> list[str]:
    return [
        f"{doc.where_error((*prefix, *e['loc']), e['type'])}: {describe_error(e)}"
        for e in exc.errors()
    ]


ParamsCatalog = Mapping[str, type[BaseModel]]
"""Action name → pydantic model of its parameters (built by the action registry)."""


def check_params(
    doc: LocatedDocument,
    loc: Loc,
    action: str,
    params: Mapping[str, Any],
    catalog: ParamsCatalog,
    *,
    params_loc: Loc | None = None,
) -> list[str]:
    """Return problems with one step: unknown action, bad parameters, bad templates.

    A templated leaf cannot be type-checked before an incident fills it in, so errors on those
    leaves are left to render time; everything else is checked now.
    """
    problems: list[str] = []
    ploc = (*loc, "params") if params_loc is None else params_loc
    if action not in catalog:
        known = ", ".join(sorted(catalog))
        return [f"{doc.where((*loc, 'action'))}: unknown action {action!r}; use one of {known}"]
    templated = template_leaves(dict(params))
    for path, text in templated:
        try:
            check_template(text)
        except TemplateError as exc:
            problems.append(f"{doc.where((*ploc, *path))}: {exc}; fix the template")
    try:
        catalog[action].model_validate(dict(params))
    except ValidationError as exc:
        paths = [p for p, _ in templated]
        for e in exc.errors():
            eloc = tuple(e["loc"])
            if any(eloc[: len(p)] == p for p in paths):
                continue
            problems.append(f"{doc.where_error((*ploc, *eloc), e['type'])}: {describe_error(e)}")
    return problems


def playbook_from_document(doc: LocatedDocument, catalog: ParamsCatalog) -> Playbook:
    """Validate one document as a playbook, including every step's action and parameters."""
    if not isinstance(doc.data, dict):
        raise PlaybookError(
            [f"{doc.where(())}: a playbook is a mapping with name, when, steps; write one"]
        )
    try:
        book = Playbook.model_validate(doc.data)
    except ValidationError as exc:
        raise PlaybookError(_errors(doc, exc)) from None
    problems: list[str] = []
    for i, step in enumerate(book.steps):
        problems += check_params(doc, ("steps", i), step.action, step.params, catalog)
    if book.verify is not None:
        problems += check_params(
            doc, ("verify",), "verify", book.verify, catalog, params_loc=("verify",)
        )
    for section in ("rollback", "escalate"):
        for i, step in enumerate(getattr(book, section) or []):
            problems += check_params(doc, (section, i), step.action, step.params, catalog)
            if step.needs_approval:
                # A rollback or escalation that waited could leave a half-applied fix in
                # place for the whole approval timeout.
                problems.append(
                    f"{doc.where_key((section, i, 'approval'))}: approval is for steps; "
                    f"{section} steps run at once, so remove it"
                )
    if problems:
        raise PlaybookError(problems)
    return book.model_copy(update={"source": doc.where(())})


def load_playbooks_text(text: str, source: str, catalog: ParamsCatalog) -> list[Playbook]:
    """Load every playbook in a YAML text (documents separated by ``---``)."""
    books: list[Playbook] = []
    problems: list[str] = []
    for doc in load_yaml_documents(text, source):
        if doc.data is None:
            continue
        try:
            books.append(playbook_from_document(doc, catalog))
        except PlaybookError as exc:
            problems += exc.problems
    if problems:
        raise PlaybookError(problems)
    return books


def check_unique(books: list[Playbook]) -> None:
    """Raise PlaybookError when two playbooks share a name (cooldowns and audit rows key on it)."""
    seen: dict[str, str] = {}
    problems = []
    for book in books:
        if book.name in seen:
            problems.append(
                f"{book.source}: playbook name {book.name!r} is also used at "
                f"{seen[book.name]}; rename one"
            )
        seen.setdefault(book.name, book.source)
    if problems:
        raise PlaybookError(problems)


def json_schema(
    action_schemas: Callable[[], Mapping[str, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Return the JSON Schema of a playbook file, with each action's parameters when given."""
    schema = Playbook.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "tritonguard playbook"
    schema.get("properties", {}).pop("source", None)
    if action_schemas is not None:
        per_action = action_schemas()
        step = schema["$defs"]["Step"]
        step["properties"]["action"]["enum"] = sorted(per_action)
        step["allOf"] = [
            {
                "if": {"properties": {"action": {"const": name}}},
                "then": {"properties": {"params": params}},
            }
            for name, params in sorted(per_action.items())
        ]
    return schema
