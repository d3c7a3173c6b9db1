"""Playbook test files (in the spirit of ``promtool test rules``) and matching of expectations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from tritonguard.core.findings import CAUSES
from tritonguard.core.playbook_model import (
    Duration,
    LocatedDocument,
    PlaybookError,
    describe_error,
    load_yaml_documents,
    parse_duration,
)
from tritonguard.core.series_notation import (
    SeriesNotationError,
    count_points,
    expand,
    parse_series_selector,
)

# The input series of one test together expand to at most this many samples (a day of 5 s
# samples for 28 series); past it the test is refused before anything is expanded.
MAX_TEST_SAMPLES = 500_000


def _positive_duration(value: Any) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(
            "must be above 0; at 0 every sample falls on one instant and the test passes "
            "without evaluating anything"
        )
    return seconds


PositiveDuration = Annotated[float, BeforeValidator(_positive_duration)]
"""A duration above zero (the spacing of samples or of evaluations)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputSeries(_Strict):
    """One series in promtool notation: ``series`` selector and expanding ``values``."""

    series: str
    values: str


class PriorRun(_Strict):
    """A run that happened before the test starts (to test cooldowns and budgets)."""

    playbook: str
    model: str
    namespace: str = ""
    pod: str = ""
    ago: Duration
    reload: bool = True


class ExpectIncident(_Strict):
    """An incident that must open: cause and model, no later than ``by`` after the start."""

    cause: str
    model: str | None = None
    namespace: str | None = None
    pod: str | None = None
    by: Duration | None = None

    @model_validator(mode="after")
    def _cause(self) -> ExpectIncident:
        if self.cause not in CAUSES:
            raise ValueError(f"unknown cause {self.cause!r}; use one of {', '.join(CAUSES)}")
        return self


class ExpectAction(_Strict):
    """An action record that must (or, under not_planned, must not) appear.

    ``approval: required`` matches a step that waits for a human's approval before it runs:
    in dry-run (every ``tritonguard test``) a plan that says a real run would wait, in a real
    run the ``awaiting_approval`` record; ``approval: none`` a step that would run at once.
    ``approvers`` must all be among those who may approve it.
    """

    action: str | None = None
    playbook: str | None = None
    model: str | None = None
    status: str | None = None
    params: dict[str, Any] = Field(default_factory=dict, description="must be a subset")
    by: Duration | None = None
    approval: Literal["required", "none"] | None = None
    approvers: list[str] = Field(default_factory=list, description="must all be approvers")


class ExpectBlocked(_Strict):
    """A guard that must block a playbook: ``guard`` is cooldown, rate, budget, bounds, ..."""

    guard: str
    playbook: str | None = None
    model: str | None = None
    reason: str | None = Field(None, description="substring of the reason")


class Expectations(_Strict):
    """What must hold after the whole input has been evaluated."""

    incidents: list[ExpectIncident] = Field(default_factory=list)
    no_incidents: bool = Field(False, description="no incident may open at all")
    absent_incidents: list[ExpectIncident] = Field(default_factory=list)
    actions: list[ExpectAction] = Field(default_factory=list)
    not_planned: list[ExpectAction] = Field(default_factory=list)
    blocked: list[ExpectBlocked] = Field(default_factory=list)


class TestCase(_Strict):
    """One test: input (series or a trace), optional fixtures, expectations."""

    name: str
    interval: PositiveDuration | None = None
    start: float = Field(1_700_000_000.0, allow_inf_nan=False)
    input_series: list[InputSeries] = Field(default_factory=list)
    trace: str | None = None
    triton_configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    prior_runs: list[PriorRun] = Field(default_factory=list)
    action_budget_per_hour: int | None = Field(None, ge=1)
    expect: Expectations

    @model_validator(mode="after")
    def _one_input(self) -> TestCase:
        if bool(self.input_series) == bool(self.trace):
            raise ValueError("give exactly one of input_series or trace")
        return self


class TestFile(_Strict):
    """A test file: which playbooks, the evaluation interval, the tests."""

    playbooks: list[str] = Field(default_factory=list, description="paths relative to this file")
    evaluation_interval: PositiveDuration = 5.0
    interval: PositiveDuration = 5.0
    tests: list[TestCase] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class SeriesInput:
    """An expanded input series: (name, labels as pairs, [(t, value or None)])."""

    name: str
    labels: tuple[tuple[str, str], ...]
    points: list[tuple[float, float | None]]


def parse_test_file(text: str, source: str) -> TestFile:
    """Parse and validate a test file; PlaybookError lines name ``file:line:col``."""
    docs = load_yaml_documents(text, source)
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        raise PlaybookError([f"{source}:1:1: a test file is one mapping with playbooks and tests"])
    doc = docs[0]
    try:
        parsed = TestFile.model_validate(doc.data)
    except ValidationError as exc:
        raise PlaybookError(
            [
                f"{doc.where_error(tuple(e['loc']), e['type'])}: {describe_error(e)}"
                for e in exc.errors()
            ]
        ) from None
    _check_series(doc, parsed)
    return parsed


def _check_series(doc: LocatedDocument, parsed: TestFile) -> None:
    problems = []
    for ti, test in enumerate(parsed.tests):
        total = 0
        for si, series in enumerate(test.input_series):
            try:
                parse_series_selector(series.series)
            except SeriesNotationError as exc:
                where = doc.where(("tests", ti, "input_series", si, "series"))
                problems.append(f"{where}: {exc}; fix the series")
            where = doc.where(("tests", ti, "input_series", si, "values"))
            try:
                total += count_points(series.values)
            except SeriesNotationError as exc:
                problems.append(f"{where}: {exc}; fix the values")
                continue
            if total > MAX_TEST_SAMPLES:
                # One line and no further checks: the rest of this test is not worth reading.
                problems.append(
                    f"{where}: the input series of test {test.name!r} expand to more than "
                    f"{MAX_TEST_SAMPLES} samples; shorten the counts (a+bxn gives n+1 "
                    "samples) or split the test"
                )
                break
    if problems:
        raise PlaybookError(problems)


def expand_inputs(test: TestCase, default_interval: float) -> list[SeriesInput]:
    """Return the test's input series expanded to timestamps from ``test.start``.

    Raises SeriesNotationError when they would expand past ``MAX_TEST_SAMPLES`` together.
    """
    interval = test.interval or default_interval
    out = []
    budget = MAX_TEST_SAMPLES
    for series in test.input_series:
        name, labels = parse_series_selector(series.series)
        points = expand(series.values, start=test.start, interval=interval, max_points=budget)
        budget -= len(points)
        out.append(SeriesInput(name, labels, points))
    return out


def _same(want: Any, got: Any) -> bool:
    """Compare leaves; a rendered template gives "500" where a test writes 500."""
    if isinstance(want, Mapping):
        return isinstance(got, Mapping) and _subset(want, got)
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(want) == len(got)
            and all(_same(w, g) for w, g in zip(want, got, strict=True))
        )
    try:
        return float(want) == float(got)
    except (TypeError, ValueError):
        return bool(want == got)


def _subset(want: Mapping[str, Any], have: Mapping[str, Any]) -> bool:
    return all(key in have and _same(value, have[key]) for key, value in want.items())


def _action_matches(want: ExpectAction, rec: Mapping[str, Any], start: float) -> bool:
    if want.action is not None and rec.get("action") != want.action:
        return False
    if want.playbook is not None and rec.get("playbook") != want.playbook:
        return False
    if want.model is not None and rec.get("model") != want.model:
        return False
    if want.status is not None and rec.get("status") != want.status:
        return False
    if want.by is not None and float(rec.get("at", 0.0)) > start + want.by:
        return False
    if want.approval is not None or want.approvers:
        approvers = approval_of(rec)
        if want.approval == "required" and approvers is None:
            return False
        if want.approval == "none" and approvers is not None:
            return False
        if want.approvers and not set(want.approvers) <= set(approvers or ()):
            return False
    return _subset(want.params, rec.get("params", {}))


def approval_of(rec: Mapping[str, Any]) -> list[str] | None:
    """Return who may approve the record's step, or None when it needs no approval.

    A plan carries ``detail.approval`` (dry-run waits for nobody, but says a real run would);
    a real run's waiting step is recorded ``awaiting_approval`` with its ``approvers``.
    """
    detail = rec.get("detail")
    detail = detail if isinstance(detail, Mapping) else {}
    planned = detail.get("approval")
    if isinstance(planned, Mapping) and planned.get("required"):
        return [str(a) for a in planned.get("approvers") or []]
    if rec.get("status") == "awaiting_approval":
        return [str(a) for a in detail.get("approvers") or []]
    return None


def _incident_matches(want: ExpectIncident, ev: Mapping[str, Any], start: float) -> bool:
    if ev.get("event") != "opened" or ev.get("cause") != want.cause:
        return False
    for key in ("model", "namespace", "pod"):
        value = getattr(want, key)
        if value is not None and ev.get(key) != value:
            return False
    return not (want.by is not None and float(ev.get("at", 0.0)) > start + want.by)


def _show(obj: BaseModel) -> str:
    data = obj.model_dump(exclude_none=True, exclude_defaults=True)
    return ", ".join(f"{k}={v}" for k, v in data.items())


def _brief_event(ev: Mapping[str, Any], start: float) -> str:
    where = "/".join(x for x in (ev.get("namespace"), ev.get("pod"), ev.get("model")) if x)
    return f"{ev.get('event')} {ev.get('cause')} {where} at +{float(ev.get('at', 0)) - start:.0f}s"


def _brief_action(rec: Mapping[str, Any], start: float) -> str:
    extra = f" guard={rec['guard']}" if rec.get("guard") else ""
    approvers = approval_of(rec)
    if approvers is not None:
        extra += f" approval=required by {', '.join(approvers) or 'anyone'}"
    return (
        f"{rec.get('status')} {rec.get('playbook')}:{rec.get('action')} on {rec.get('model')} "
        f"at +{float(rec.get('at', 0)) - start:.0f}s params={rec.get('params')}{extra}"
    )


def check(
    expect: Expectations,
    events: Sequence[Mapping[str, Any]],
    actions: Sequence[Mapping[str, Any]],
    start: float,
) -> list[str]:
    """Return failure lines (expected vs got) for one test; empty when everything holds.

    ``events`` are incident transitions (contract JSON), ``actions`` every action record with
    its ``model`` and ``at``.
    """
    failures: list[str] = []
    opened = [e for e in events if e.get("event") == "opened"]
    seen_inc = "; ".join(_brief_event(e, start) for e in opened) or "no incidents"
    seen_act = "\n      ".join(_brief_action(a, start) for a in actions) or "no actions"
    for want in expect.incidents:
        if not any(_incident_matches(want, e, start) for e in events):
            failures.append(f"expected incident [{_show(want)}]\n    got: {seen_inc}")
    if expect.no_incidents and opened:
        failures.append(f"expected no incidents\n    got: {seen_inc}")
    for want in expect.absent_incidents:
        if any(_incident_matches(want, e, start) for e in events):
            failures.append(f"expected no incident [{_show(want)}]\n    got: {seen_inc}")
    for want_a in expect.actions:
        if not any(_action_matches(want_a, a, start) for a in actions):
            failures.append(f"expected action [{_show(want_a)}]\n    got: {seen_act}")
    for want_a in expect.not_planned:
        hits = [
            a
            for a in actions
            if _action_matches(want_a, a, start) and a.get("status") in ("planned", "ran")
        ]
        if hits:
            shown = "\n      ".join(_brief_action(a, start) for a in hits)
            failures.append(f"expected no action [{_show(want_a)}]\n    got: {shown}")
    for want_b in expect.blocked:
        ok = any(
            a.get("guard") == want_b.guard
            and (want_b.playbook is None or a.get("playbook") == want_b.playbook)
            and (want_b.model is None or a.get("model") == want_b.model)
            and (want_b.reason is None or want_b.reason in str(a.get("reason", "")))
            for a in actions
        )
        if not ok:
            failures.append(f"expected guard to block [{_show(want_b)}]\n    got: {seen_act}")
    return failures
