"""Label and field selectors, compiled to predicates over stored objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.fakes.kube.resources import JsonObj

LabelTerm = tuple[str, str, frozenset[str]]


def _split_selector(selector: str) -> list[str]:
    """Split on the commas that are not inside a set ``(x,y)``."""
    parts: list[str] = []
    depth = 0
    buf = ""
    for ch in selector:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(buf)
            buf = ""
        else:
            buf += ch
    parts.append(buf)
    return [p.strip() for p in parts if p.strip()]


def _equality(raw: str) -> tuple[str, bool, str] | None:
    """Parse ``k!=v``, ``k==v`` or ``k=v`` into ``(key, equal, value)``; None if neither."""
    if "!=" in raw:
        k, _, v = raw.partition("!=")
        return k.strip(), False, v.strip()
    if "=" in raw:
        k, _, v = raw.replace("==", "=").partition("=")
        return k.strip(), True, v.strip()
    return None


def _label_term(raw: str) -> LabelTerm:
    """Parse one requirement into ``(key, operator, values)``."""
    for word, op in ((" notin ", "notin"), (" in ", "in")):
        if word in raw:
            k, _, vals = raw.partition(word)
            return k.strip(), op, frozenset(v.strip() for v in vals.strip().strip("()").split(","))
    eq = _equality(raw)
    if eq is not None:
        key, equal, value = eq
        return key, "in" if equal else "notin", frozenset([value])
    if raw.startswith("!"):
        return raw[1:].strip(), "absent", frozenset()
    return raw, "exists", frozenset()


def _label_holds(labels: dict[str, str], term: LabelTerm) -> bool:
    key, op, values = term
    if op == "in":
        return labels.get(key) in values
    if op == "notin":
        return labels.get(key) not in values
    if op == "absent":
        return key not in labels
    return key in labels


def parse_label_selector(selector: str) -> Callable[[dict[str, str]], bool]:
    """Compile a label selector (``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``, ``a in (x,y)``)."""
    terms = [_label_term(raw) for raw in _split_selector(selector)]
    return lambda labels: all(_label_holds(labels, t) for t in terms)


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def parse_field_selector(selector: str) -> Callable[[JsonObj], bool]:
    """Compile a field selector (``metadata.name=x,status.phase!=Running``)."""
    terms: list[tuple[str, bool, str]] = []
    for raw in (p.strip() for p in selector.split(",")):
        eq = _equality(raw) if raw else None
        if eq is not None:
            terms.append(eq)
        elif raw:
            # A bare field name, which the real server rejects, selects where the field is "".
            terms.append((raw, True, ""))
    return lambda o: all((str(_dig(o, k) or "") == v) == eq for k, eq, v in terms)


def labels_of(obj: JsonObj) -> dict[str, str]:
    """Return an object's labels, as strings."""
    labels = obj.get("metadata", {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def selector_string(match_labels: dict[str, str]) -> str:
    """Render ``matchLabels`` as the selector string a Scale's status carries."""
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))


def matcher(
    namespace: str | None, label_selector: str = "", field_selector: str = ""
) -> Callable[[JsonObj], bool]:
    """Compile the namespace and selectors of a list or watch into one predicate."""
    labels = parse_label_selector(label_selector)
    fields = parse_field_selector(field_selector)
    return lambda o: (
        (namespace is None or o.get("metadata", {}).get("namespace", "") == namespace)
        and labels(labels_of(o))
        and fields(o)
    )
