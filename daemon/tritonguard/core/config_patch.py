"""Apply a bounded patch to a Triton model configuration (``GET /v2/models/{m}/config`` JSON)."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# A path is dotted field names with optional list indices: ``instance_group[0].count``.
_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")
_INDEX = re.compile(r"\[(\d+)\]")


class PatchError(ValueError):
    """The patch cannot be applied (bad path, wrong type) or would leave a bound."""


class BoundError(PatchError):
    """A numeric change would leave its bound, or has no bound at all."""


@dataclass(frozen=True, slots=True)
class Bound:
    """Inclusive limits for one numeric field of the configuration."""

    min: float | None = None
    max: float | None = None

    def check(self, path: str, value: float) -> None:
        """Raise PatchError when ``value`` lies outside the bound."""
        if self.min is not None and value < self.min:
            raise BoundError(f"{path}={_fmt(value)} is below its bound min={_fmt(self.min)}")
        if self.max is not None and value > self.max:
            raise BoundError(f"{path}={_fmt(value)} is above its bound max={_fmt(self.max)}")


# Bounds that hold unless a playbook narrows or widens them. Every numeric field a patch changes
# must be covered by a bound: an unbounded numeric change is refused rather than trusted.
DEFAULT_BOUNDS: dict[str, Bound] = {
    "dynamic_batching.max_queue_delay_microseconds": Bound(0, 1_000_000),
    "dynamic_batching.default_queue_policy.default_timeout_microseconds": Bound(0, 60_000_000),
    "dynamic_batching.default_queue_policy.max_queue_size": Bound(0, 100_000),
    "dynamic_batching.preferred_batch_size[*]": Bound(1, 4096),
    "instance_group[*].count": Bound(1, 16),
    "max_batch_size": Bound(0, 4096),
    "model_warmup[*].batch_size": Bound(0, 4096),
    "model_warmup[*].count": Bound(0, 100),
    "model_warmup[*].inputs.*.dims[*]": Bound(-1, 1 << 20),
}


@dataclass(frozen=True, slots=True)
class ConfigPatch:
    """Changes to a model configuration: values to set, numbers to add to, fields to remove."""

    set: Mapping[str, Any] = field(default_factory=dict)
    add: Mapping[str, float] = field(default_factory=dict)
    remove: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Change:
    """One leaf that differs between the old and the new configuration."""

    path: str
    old: Any
    new: Any

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form used in action records."""
        return {"path": self.path, "old": self.old, "new": self.new}


def parse_path(path: str) -> list[str | int]:
    """Split ``a.b[0].c`` into ``["a", "b", 0, "c"]``; raise PatchError when malformed."""
    parts: list[str | int] = []
    if not path:
        raise PatchError("empty configuration path")
    for raw in path.split("."):
        m = _SEGMENT.fullmatch(raw)
        if m is None:
            raise PatchError(
                f"bad configuration path {path!r}; write fields like instance_group[0].count"
            )
        parts.append(m.group(1))
        parts.extend(int(i) for i in _INDEX.findall(m.group(2)))
    return parts


def _as_number(value: Any) -> float | None:
    """Triton serialises 64-bit integers as JSON strings; treat those as numbers too."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _like(old: Any, number: float) -> Any:
    """Return ``number`` in the representation ``old`` used (string for int64 fields)."""
    as_int: int | float = int(number) if float(number).is_integer() else number
    if isinstance(old, str):
        return str(as_int)
    return as_int


def _walk(
    config: dict[str, Any], parts: list[str | int], path: str, create: bool
) -> tuple[Any, str | int]:
    """Return (container, last key) for ``parts``, creating intermediate objects when asked."""
    node: Any = config
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise PatchError(f"{path}: index [{part}] does not exist in the configuration")
            node = node[part]
            continue
        if not isinstance(node, dict):
            raise PatchError(f"{path}: {part!r} is not inside an object")
        if part not in node:
            if not create:
                raise PatchError(f"{path}: field {part!r} is not in the configuration")
            node[part] = [] if isinstance(nxt, int) else {}
        node = node[part]
    return node, parts[-1]


def _peek(container: Any, key: str | int) -> Any:
    if isinstance(key, int):
        return container[key] if isinstance(container, list) and key < len(container) else None
    return container.get(key) if isinstance(container, dict) else None


def _get(container: Any, key: str | int, path: str) -> Any:
    if isinstance(key, int):
        if not isinstance(container, list) or key >= len(container):
            raise PatchError(f"{path}: index [{key}] does not exist in the configuration")
        return container[key]
    if not isinstance(container, dict):
        raise PatchError(f"{path}: {key!r} is not inside an object")
    return container.get(key)


def _put(container: Any, key: str | int, value: Any, path: str) -> None:
    if isinstance(key, int):
        if not isinstance(container, list) or key >= len(container):
            raise PatchError(f"{path}: index [{key}] does not exist in the configuration")
        container[key] = value
        return
    if not isinstance(container, dict):
        raise PatchError(f"{path}: {key!r} is not inside an object")
    container[key] = value


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Return every leaf of a JSON value keyed by its path (``a.b[0].c``)."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list):
        if not value and prefix:
            out[prefix] = []
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def _pattern(pattern: str) -> re.Pattern[str]:
    """Compile a bound key: ``[*]`` matches any index, ``*`` any one field name."""
    rx = re.escape(pattern).replace(r"\[\*\]", r"\[\d+\]").replace(r"\*", r"[^.\[]+")
    return re.compile(rx)


def bound_for(path: str, bounds: Mapping[str, Bound]) -> Bound | None:
    """Return the bound covering ``path``: the exact path first, then the first matching pattern."""
    if path in bounds:
        return bounds[path]
    for key, bound in bounds.items():
        if ("*" in key) and _pattern(key).fullmatch(path):
            return bound
    return None


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Return the leaves that differ between two configurations, sorted by path."""
    a, b = flatten(dict(old)), flatten(dict(new))
    return [
        Change(path, a.get(path), b.get(path))
        for path in sorted(set(a) | set(b))
        if a.get(path) != b.get(path)
    ]


def reverse_patch(previous: Mapping[str, Any], changes: list[Change]) -> ConfigPatch | None:
    """Return the patch that puts ``changes`` back on whatever config is live later, or None.

    Restoring only the changed paths keeps what others changed since (an instance added by
    another playbook, an operator's edit); a whole-config reload would undo those too. A field
    the change created is removed from its highest ancestor that did not exist before. None
    when the change removed something (a list entry cannot be put back by path).
    """
    if any(c.new is None for c in changes):
        return None
    before = flatten(dict(previous))
    set_: dict[str, Any] = {}
    remove: list[str] = []
    for change in changes:
        if change.old is not None:
            set_[change.path] = change.old
            continue
        parts = parse_path(change.path)
        prefix = ""
        for part in parts:
            prefix = (
                f"{prefix}[{part}]"
                if isinstance(part, int)
                else (f"{prefix}.{part}" if prefix else part)
            )
            if not any(p == prefix or p.startswith((prefix + ".", prefix + "[")) for p in before):
                break
        if isinstance(parts[-1], int) or "[" in prefix.rsplit(".", 1)[-1]:
            return None  # a new list entry: removing by index could hit another one
        if prefix not in remove:
            remove.append(prefix)
    return ConfigPatch(set=set_, remove=tuple(remove))


def apply_patch(
    config: Mapping[str, Any],
    patch: ConfigPatch,
    bounds: Mapping[str, Bound] | None = None,
    *,
    check_bounds: bool = True,
) -> tuple[dict[str, Any], list[Change]]:
    """Return the patched copy of ``config`` and its changes; never modify the input.

    Every numeric leaf whose value changes must lie within a bound from ``bounds`` (playbook
    bounds merged over DEFAULT_BOUNDS by the caller; DEFAULT_BOUNDS when None). A numeric change
    with no bound at all is refused, so a typo cannot push a field to an arbitrary value.
    ``check_bounds=False`` is for putting back values the server had before the daemon changed
    them: bounds guard new values, not a restore.
    """
    limits = DEFAULT_BOUNDS if bounds is None else bounds
    new: dict[str, Any] = copy.deepcopy(dict(config))
    for path, value in patch.set.items():
        parts = parse_path(path)
        container, key = _walk(new, parts, path, create=True)
        old = _peek(container, key)
        number = _as_number(value)
        keep_type = old is not None and number is not None and _as_number(old) is not None
        new_value = _like(old, number) if keep_type and number is not None else value
        _put(container, key, copy.deepcopy(new_value), path)
    for path, delta in patch.add.items():
        parts = parse_path(path)
        container, key = _walk(new, parts, path, create=False)
        old = _get(container, key, path)
        base = _as_number(old)
        if base is None:
            raise PatchError(
                f"{path}: cannot add to {old!r}; it is not a number in the configuration"
            )
        _put(container, key, _like(old, base + float(delta)), path)
    for path in patch.remove:
        parts = parse_path(path)
        container, key = _walk(new, parts, path, create=False)
        if isinstance(key, int):
            if isinstance(container, list) and key < len(container):
                del container[key]
        elif isinstance(container, dict):
            container.pop(key, None)
    changes = diff(config, new)
    for change in changes if check_bounds else ():
        number = _as_number(change.new)
        if number is None or change.new is None:
            continue
        bound = bound_for(change.path, limits)
        if bound is None:
            raise BoundError(
                f"{change.path} would change to {change.new!r} but has no bound; "
                "add one under guards.bounds in the playbook"
            )
        bound.check(change.path, number)
    if new.get("name") != config.get("name"):
        raise PatchError("a patch must not rename the model")
    return new, changes
