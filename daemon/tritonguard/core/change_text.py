"""How a change reads in one line: each leaf's value shortened, the first few leaves, the rest counted.

Pure. Model-config diffs, rollouts' pod-template diffs and ConfigMap diffs all go to logs,
Slack, Events and replay text in the same shape, ``path: old → new; …; and 3 more``; the
names that hold secrets are shared too, so every kind of change hides them alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tritonguard.core.config_patch import Change

# Leaves listed in a summary line; the rest are counted ("and 3 more").
SUMMARY_LEAVES = 3
# Names of settings that hold secrets. A diff goes to logs, Slack and Events: a value under
# such a name (Triton's `--http-restricted-api=...:triton-access-token=<value>`, an env
# API_KEY, a ConfigMap key `auth_token`) is shown as changed, never as itself.
SECRETISH = re.compile(
    r"token|secret|passw(?:or)?d|api[-_]?key|credential|auth|private[-_]?key|bearer", re.I
)
# A secret's name followed by its value in one word or line (`token=…`, `password: …`).
SECRET_ASSIGN = re.compile(
    r"(?:token|secret|passw(?:or)?d|api[-_]?key|credential|auth\w*|private[-_]?key|bearer)"
    r"[^=:]*[=:]",
    re.I,
)
HIDDEN = "***"


def show(value: Any, *, width: int = 40, words: bool = False) -> str:
    """Return a leaf's value in at most ``width`` characters; ``None`` (absent) is ``(none)``.

    With ``words`` a list (a container's command or args) is joined by spaces, as a shell
    shows it; otherwise it reads as JSON-ish text (an emptied list is ``[]``).
    """
    if value is None:
        return "(none)"
    listed = words and isinstance(value, list | tuple)
    text = " ".join(map(str, value)) if listed else str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def leaves_line(
    parts: Iterable[str], limit: int = SUMMARY_LEAVES, *, untold: int = 0, sep: str = "; "
) -> str:
    """Join the first ``limit`` parts with ``sep`` and count the rest: ``…; and 3 more``.

    ``untold`` counts parts that were never kept (a diff cut short) with the rest.
    """
    shown = list(parts)
    more = len(shown) - min(limit, len(shown)) + untold
    return sep.join(shown[:limit]) + (f"{sep}and {more} more" if more > 0 else "")


def changes_line(
    changes: Iterable[Change], *, width: int = 40, words: bool = False, untold: int = 0
) -> str:
    """Return ``path: old → new`` for the first few changes, the rest counted."""
    return leaves_line(
        (
            f"{c.path}: {show(c.old, width=width, words=words)} → "
            f"{show(c.new, width=width, words=words)}"
            for c in changes
        ),
        untold=untold,
    )
