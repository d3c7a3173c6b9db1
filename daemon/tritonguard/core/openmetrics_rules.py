"""OpenMetrics 1.0 family rules: metadata placement, sample names, grouping, values, histograms.

The line syntax is checked by ``exposition``; this module checks what only a view across lines
shows, in the order of the input: one call per metadata line (``meta``) and per sample
(``sample``), then ``end`` at ``# EOF``. A rule broken raises ``RuleError`` with a one-line
reason; the caller adds the line.

Two relaxations, both chosen because they cannot make evidence wrong:

- A family may appear again after other families when its metadata is repeated first (a
  trace that concatenates scrapes does this); it must keep its type. Without repeated
  metadata a family's samples must stay together, as OpenMetrics says.
- ``# UNIT`` need not be a suffix of the family name: units are metadata the engine never
  reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tritonguard.core.samples import Labels

__all__ = ["TYPE_SUFFIXES", "OpenMetricsRules", "RuleError"]

# The sample names each type allows, as suffixes of the family name; other types allow "".
TYPE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("_total", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "histogram": ("_count", "_sum", "_bucket", "_created"),
    "gaugehistogram": ("_gcount", "_gsum", "_bucket"),
    "info": ("_info",),
}
_PLAIN = ("",)
# Counter-like parts: never NaN; all but _gsum never negative (gauge histograms may have
# negative buckets, and then a negative sum).
_NOT_NAN = frozenset({"_total", "_sum", "_count", "_bucket", "_gcount", "_gsum"})
_NOT_NEGATIVE = frozenset({"_total", "_sum", "_count", "_bucket", "_gcount"})
_INTEGRAL = frozenset({"_count", "_gcount", "_bucket"})
_HISTOGRAMS = frozenset({"histogram", "gaugehistogram"})
_NO_UNIT = frozenset({"info", "stateset"})
# Exemplar label sets are at most this many characters, names and values counted together.
MAX_EXEMPLAR_CHARS = 128


class RuleError(ValueError):
    """An OpenMetrics rule broken; ``str()`` is a one-line reason without the line number."""


@dataclass(slots=True)
class _View:
    """What one series means inside its family: its part, its group, the checks it needs."""

    suffix: str
    group: Labels
    exemplar_ok: bool


@dataclass(slots=True)
class _Point:
    """One histogram point (its buckets, count and sum at one timestamp) being checked."""

    last_le: float | None = None
    last_bucket: float = 0.0
    count: float | None = None
    negative_buckets: bool = False
    has_sum: bool = False
    has_gsum: bool = False
    negative_gsum: bool = False


@dataclass(slots=True)
class _Block:
    """One run of a family: its metadata lines, then its samples."""

    name: str
    kind: str = "unknown"
    allowed: dict[str, str] = field(default_factory=dict)
    meta_seen: set[str] = field(default_factory=set)
    unit: str | None = None
    has_samples: bool = False
    views: dict[object, _View] = field(default_factory=dict)
    seen_groups: set[Labels] = field(default_factory=set)
    group: Labels | None = None
    group_ts: float | None = None
    group_started: bool = False
    point: _Point | None = None
    point_key: tuple[Labels, float | None] | None = None

    def set_kind(self, kind: str) -> None:
        """Declare the block's type; its allowed sample names follow from it."""
        self.kind = kind
        self.allowed = {self.name + s: s for s in TYPE_SUFFIXES.get(kind, _PLAIN)}


def _new_block(name: str) -> _Block:
    block = _Block(name)
    block.set_kind("unknown")
    return block


class OpenMetricsRules:
    """The cross-line rules of one OpenMetrics exposition, fed in input order."""

    def __init__(self) -> None:
        self._block: _Block | None = None
        self._entry: object = None
        self._view: _View | None = None
        # Every sample name a finished block claimed, and the family that claimed it.
        self._owners: dict[str, str] = {}
        # Types of the families seen so far (a family shown again must keep its type).
        self._kinds: dict[str, str] = {}

    def copy(self) -> OpenMetricsRules:
        """Return an independent copy (to try a chunk and fall back to this state)."""
        other = OpenMetricsRules()
        other._owners = dict(self._owners)
        other._kinds = dict(self._kinds)
        block = self._block
        if block is not None:
            other._block = _Block(
                name=block.name,
                kind=block.kind,
                allowed=dict(block.allowed),
                meta_seen=set(block.meta_seen),
                unit=block.unit,
                has_samples=block.has_samples,
                views=dict(block.views),
                seen_groups=set(block.seen_groups),
                group=block.group,
                group_ts=block.group_ts,
                group_started=block.group_started,
                point=None if block.point is None else _copy_point(block.point),
                point_key=block.point_key,
            )
            other._entry = self._entry
            other._view = self._view
        return other

    # ---- metadata ------------------------------------------------------------------------
    def meta(self, keyword: str, family: str, value: str) -> None:
        """Take a ``# HELP``/``# TYPE``/``# UNIT`` line (``value``: its text, type or unit)."""
        block = self._block
        if block is None or block.name != family:
            self._close()
            block = self._block = _new_block(family)
            self._entry = None
        elif block.has_samples:
            raise RuleError(
                f"'# {keyword}' for {family!r} after its samples; metadata comes before a "
                "family's samples"
            )
        if keyword in block.meta_seen:
            raise RuleError(f"a second '# {keyword}' for {family!r}; give it once per family")
        block.meta_seen.add(keyword)
        if keyword == "TYPE":
            if value == "untyped":
                raise RuleError(
                    f"type 'untyped' for {family!r} is 0.0.4's name; OpenMetrics says 'unknown'"
                )
            earlier = self._kinds.get(family)
            if earlier is not None and earlier != value:
                raise RuleError(
                    f"family {family!r} was declared {earlier!r} earlier and {value!r} here; "
                    "one family must keep one type"
                )
            block.set_kind(value)
            if block.unit and value in _NO_UNIT:
                raise RuleError(f"a {value} family ({family!r}) cannot have a unit")
        elif keyword == "UNIT":
            block.unit = value
            if value and block.kind in _NO_UNIT:
                raise RuleError(f"a {block.kind} family ({family!r}) cannot have a unit")

    # ---- samples -------------------------------------------------------------------------
    def sample(
        self,
        entry: object,
        name: str,
        labels: Labels,
        value: float,
        timestamp: float | None,
        *,
        exemplar: bool = False,
    ) -> None:
        """Take one sample; ``entry`` identifies its series text (same text, same object)."""
        block = self._block
        if entry is not self._entry or block is None:
            view = self._enter(entry, name, labels)
            block = self._block
            assert block is not None
        else:
            current = self._view
            assert current is not None
            view = current
        suffix = view.suffix
        # Timestamps within a group: all given or none, and never going back (info excepted).
        if view.group is not block.group and view.group != block.group:
            self._switch_group(block, view.group)
        if block.group_started:
            if (timestamp is None) != (block.group_ts is None):
                raise RuleError(
                    f"{name}: some samples of this metric have timestamps and some not; "
                    "give all or none"
                )
            if (
                timestamp is not None
                and block.group_ts is not None
                and timestamp < block.group_ts
                and block.kind != "info"
            ):
                raise RuleError(
                    f"{name}: timestamp {timestamp!r} goes back from {block.group_ts!r} "
                    "within one metric; write its points in time order"
                )
        block.group_started = True
        block.group_ts = timestamp
        if exemplar and not view.exemplar_ok:
            raise RuleError(
                f"{name}: exemplars are allowed only on counters' _total and histogram buckets"
            )
        if suffix:
            if math.isnan(value):
                if suffix in _NOT_NAN:
                    raise RuleError(f"{name} is NaN; a counter-like value must be a number")
            elif value < 0 and suffix in _NOT_NEGATIVE:
                raise RuleError(f"{name} is {value!r}; a counter-like value cannot be negative")
            if suffix in _INTEGRAL and not float(value).is_integer():
                raise RuleError(f"{name} is {value!r}; counts and buckets are whole numbers")
        kind = block.kind
        if kind == "summary" and not suffix and value < 0:
            raise RuleError(f"{name}: quantile value {value!r} cannot be negative")
        elif kind == "stateset" and value not in (0.0, 1.0):
            raise RuleError(f"{name}: a stateset value is 0 or 1, not {value!r}")
        elif kind == "info" and value != 1.0:
            raise RuleError(f"{name}: an info value is 1, not {value!r}")
        if kind in _HISTOGRAMS and suffix:
            self._histogram_part(
                block, view, name=name, labels=labels, value=value, timestamp=timestamp
            )

    def _enter(self, entry: object, name: str, labels: Labels) -> _View:
        """Switch to the series ``entry``, starting a family block when it belongs to none."""
        block = self._block
        if block is None or name not in block.allowed:
            self._close()
            owner = self._owners.get(name)
            if owner is not None:
                raise RuleError(
                    f"{name} does not belong to the family before it, and family {owner!r} "
                    "earlier claims the name; a family's samples must stay together and fit "
                    "its type (repeat its '# TYPE' line to start it again)"
                )
            block = self._block = _new_block(name)
        block.has_samples = True
        view = block.views.get(entry)
        if view is None:
            view = block.views[entry] = self._view_of(block, name, labels)
        self._entry = entry
        self._view = view
        return view

    def _view_of(self, block: _Block, name: str, labels: Labels) -> _View:
        suffix = block.allowed[name]
        kind = block.kind
        group = labels
        exemplar_ok = (kind == "counter" and suffix == "_total") or (
            kind in _HISTOGRAMS and suffix == "_bucket"
        )
        if kind == "info":
            group = ()
        elif kind == "summary" and not suffix:
            quantile = _label(labels, "quantile")
            if quantile is None:
                raise RuleError(f"{name}: a summary's quantile sample needs a 'quantile' label")
            q = _number(quantile)
            if q is None or not 0.0 <= q <= 1.0:
                raise RuleError(f"{name}: quantile {quantile!r} is not a number from 0 to 1")
            group = tuple(p for p in labels if p[0] != "quantile")
        elif kind == "stateset":
            if _label(labels, block.name) is None:
                raise RuleError(f"{name}: a stateset sample needs a label named {block.name!r}")
            group = tuple(p for p in labels if p[0] != block.name)
        elif kind in _HISTOGRAMS and suffix == "_bucket":
            le = _label(labels, "le")
            bound = None if le is None else _number(le)
            if le is None or bound is None or math.isnan(bound):
                raise RuleError(f"{name}: a bucket needs an 'le' label holding a number")
            if bound == math.inf and le != "+Inf":
                raise RuleError(f'{name}: write the top bucket as le="+Inf", not {le!r}')
            group = tuple(p for p in labels if p[0] != "le")
        return _View(suffix, group, exemplar_ok)

    def _switch_group(self, block: _Block, group: Labels) -> None:
        if group in block.seen_groups:
            raise RuleError(
                f"the samples of {block.name}{_show(group)} are split by other metrics; a "
                "metric's samples must stay together"
            )
        block.seen_groups.add(group)
        block.group = group
        block.group_started = False
        block.group_ts = None

    def _histogram_part(
        self,
        block: _Block,
        view: _View,
        *,
        name: str,
        labels: Labels,
        value: float,
        timestamp: float | None,
    ) -> None:
        key = (view.group, timestamp)
        point = block.point
        if point is None or block.point_key != key:
            if point is not None:
                _check_point(block.name, point)
            point = block.point = _Point()
            block.point_key = key
        suffix = view.suffix
        if suffix == "_bucket":
            bound = _number(_label(labels, "le") or "")
            assert bound is not None
            if bound < 0:
                point.negative_buckets = True
            if point.last_le is not None and bound <= point.last_le:
                raise RuleError(f"{name}: buckets must come in increasing 'le' order")
            if value < point.last_bucket:
                raise RuleError(f"{name}: bucket counts must not decrease as 'le' grows")
            point.last_le = bound
            point.last_bucket = value
        elif suffix in ("_count", "_gcount"):
            point.count = value
        elif suffix == "_sum":
            point.has_sum = True
        elif suffix == "_gsum":
            point.has_gsum = True
            if value < 0:
                point.negative_gsum = True

    def end(self) -> None:
        """Finish the exposition (at ``# EOF``): check the last family."""
        self._close()

    def _close(self) -> None:
        block = self._block
        if block is None:
            return
        if block.point is not None:
            _check_point(block.name, block.point)
            block.point = None
        family = block.name
        earlier = self._kinds.get(family)
        if earlier is not None and earlier != block.kind:
            raise RuleError(
                f"family {family!r} was {earlier!r} earlier and {block.kind!r} here; one family "
                "must keep one type"
            )
        names = {family + s for s in TYPE_SUFFIXES.get(block.kind, _PLAIN)}
        names.add(family)
        for sample_name in names:
            owner = self._owners.get(sample_name)
            if owner is not None and owner != family:
                raise RuleError(
                    f"family {family!r} ({block.kind}) clashes with family {owner!r} over the "
                    f"name {sample_name!r}"
                )
        for sample_name in names:
            self._owners[sample_name] = family
        self._kinds[family] = block.kind
        self._block = None
        self._entry = None
        self._view = None


def _check_point(family: str, point: _Point) -> None:
    """Check one histogram point once all its parts are in."""
    if point.last_le != math.inf:
        raise RuleError(f'histogram {family!r} lacks its le="+Inf" bucket')
    if point.count is not None and point.count != point.last_bucket:
        raise RuleError(f"histogram {family!r}: the count differs from the +Inf bucket")
    if point.has_sum and point.count is None:
        raise RuleError(f"histogram {family!r} has a _sum without a _count")
    if point.has_gsum and point.count is None:
        raise RuleError(f"gauge histogram {family!r} has a _gsum without a _gcount")
    if not (point.has_sum or point.has_gsum) and point.count is not None:
        raise RuleError(f"histogram {family!r} has a count without a sum")
    if point.negative_buckets and point.has_sum:
        raise RuleError(f"histogram {family!r} has negative buckets, so it cannot have a _sum")
    if not point.negative_buckets and point.negative_gsum:
        raise RuleError(f"gauge histogram {family!r}: a negative _gsum needs negative buckets")


def _copy_point(point: _Point) -> _Point:
    return _Point(
        point.last_le,
        point.last_bucket,
        point.count,
        point.negative_buckets,
        point.has_sum,
        point.has_gsum,
        point.negative_gsum,
    )


def _label(labels: Labels, name: str) -> str | None:
    for key, value in labels:
        if key == name:
            return value
    return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _show(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
