"""Bounded YAML loading: every document composed in bounded time and memory, or refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

__all__ = ["DEFAULT_LIMITS", "YamlDocument", "YamlLimits", "YamlRefused", "load_yaml"]


@dataclass(frozen=True, slots=True)
class YamlLimits:
    """How large a YAML text may be, counted before anything is built from it.

    ``max_nodes`` counts nodes as if every alias were written out, so it bounds what any
    consumer that walks the data as a tree (validation, position tracking) will visit.
    """

    max_chars: int = 1_048_576
    max_nodes: int = 50_000
    max_depth: int = 64
    max_int_digits: int = 64


# Playbooks, their test files and the daemon's config file are a few KB to a few hundred KB;
# these limits leave room for large hand-written tests while a hostile file stops at once.
DEFAULT_LIMITS = YamlLimits()


class YamlRefused(ValueError):
    """A YAML text refused before it could exhaust memory; ``str()`` is ``file:line:col: why``."""

    def __init__(self, source: str, line: int, column: int, reason: str) -> None:
        super().__init__(f"{source}:{line}:{column}: {reason}")
        self.source = source
        self.line = line
        self.column = column
        self.reason = reason


@dataclass(frozen=True, slots=True)
class YamlDocument:
    """One composed document: its node tree (with positions) and the constructor that built it."""

    node: yaml.Node
    constructor: SafeConstructor

    def data(self) -> Any:
        """Return the document as plain data, exactly as ``yaml.safe_load`` would."""
        return self.constructor.construct_document(self.node)


class _Position(Protocol):
    line: int
    column: int


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts every node it composes, an alias counting as its whole target.

    PyYAML composes an alias as a reference to the anchored node, so a 1 KB text can describe
    a graph whose tree has billions of nodes; a consumer that walks it as a tree (and pydantic
    does) then runs out of memory. Counting while composing refuses the text at the alias
    that crosses the limit, before anything large exists.
    """

    def __init__(self, text: str, source: str, limits: YamlLimits) -> None:
        super().__init__(text)
        self.source = source
        self.limits = limits
        self.nodes = 0
        self.depth = 0
        # Expanded size of each anchored node once it is complete; an alias to an anchor that
        # is not here yet points into the node still being composed (a cycle).
        self.sizes: dict[str, int] = {}

    def refuse(self, mark: _Position | None, reason: str) -> YamlRefused:
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return YamlRefused(self.source, line, column, reason)

    def compose_document(self) -> yaml.Node | None:
        self.sizes = {}
        self.nodes = 0
        return super().compose_document()

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        limits = self.limits
        # check_event() leaves the event it looked at in current_event (peek_event is untyped).
        if self.check_event(yaml.AliasEvent):
            event: yaml.Event = self.current_event
            anchor = str(getattr(event, "anchor", ""))
            if anchor in self.anchors:
                size = self.sizes.get(anchor)
                if size is None:
                    raise self.refuse(
                        event.start_mark,
                        f"alias *{anchor} refers to the collection that contains it; a "
                        "document that nests itself cannot be loaded, write the values out",
                    )
                self.nodes += size
                if self.nodes > limits.max_nodes:
                    raise self.refuse(
                        event.start_mark,
                        f"alias *{anchor} expands the document past {limits.max_nodes} values "
                        "(aliases nested in aliases, a 'billion laughs' document); write the "
                        "values out or nest fewer aliases",
                    )
            return super().compose_node(parent, index)
        self.check_event()
        event = self.current_event
        self.nodes += 1
        if self.nodes > limits.max_nodes:
            raise self.refuse(
                event.start_mark,
                f"more than {limits.max_nodes} values in one document; split it into several files",
            )
        self.depth += 1
        if self.depth > limits.max_depth:
            raise self.refuse(
                event.start_mark,
                f"nested more than {limits.max_depth} levels deep; flatten the document",
            )
        before = self.nodes - 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        own = getattr(event, "anchor", None)
        if own is not None:
            self.sizes[str(own)] = self.nodes - before
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        # int() of a long digit string is quadratic and Python refuses it with a bare
        # ValueError past 4300 digits; no setting needs more than a few.
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > self.limits.max_int_digits:
            raise ConstructorError(
                None,
                None,
                f"integer of {digits} digits; no value here needs more than "
                f"{self.limits.max_int_digits}",
                node.start_mark,
            )
        value: int = super().construct_yaml_int(node)
        return value


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def load_yaml(text: str, source: str, limits: YamlLimits = DEFAULT_LIMITS) -> list[YamlDocument]:
    """Compose every document of ``text`` within ``limits``; raise YamlRefused beyond them.

    Syntax errors propagate as PyYAML's ``MarkedYAMLError`` (each caller words them in its
    own style). Nothing is constructed yet: call ``YamlDocument.data()`` or walk the nodes
    with the document's constructor.
    """
    if len(text) > limits.max_chars:
        line = text.count("\n", 0, limits.max_chars) + 1
        column = limits.max_chars - (text.rfind("\n", 0, limits.max_chars) + 1) + 1
        raise YamlRefused(
            source,
            line,
            column,
            f"{len(text)} characters, over the limit of {limits.max_chars}; "
            "split it into several files",
        )
    loader = _BoundedLoader(text, source, limits)
    docs: list[YamlDocument] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                docs.append(YamlDocument(node, loader))
    finally:
        loader.dispose()
    return docs
