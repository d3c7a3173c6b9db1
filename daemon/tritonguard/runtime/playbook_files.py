"""Where playbooks come from: files and directories, validated together, and the shipped set."""

from __future__ import annotations

import sys
from pathlib import Path

from tritonguard.actions.registry import load_all
from tritonguard.core.playbook_model import (
    Playbook,
    PlaybookError,
    check_unique,
    load_playbooks_text,
)


def shipped_playbooks_dir() -> Path:
    """Return the shipped playbooks: the source tree's ``playbooks/``, else the installed copy.

    The wheel installs them (with their tests) under ``<prefix>/share/tritonguard/playbooks``.
    """
    source = Path(__file__).resolve().parents[3] / "playbooks"
    if source.is_dir():
        return source
    return Path(sys.prefix) / "share" / "tritonguard" / "playbooks"


# The playbooks shipped with the product: one per cause, all in dry-run until turned off.
SHIPPED_PLAYBOOKS = shipped_playbooks_dir()


def playbook_paths(paths: list[Path]) -> list[Path]:
    """Expand directories into their ``*.yaml``/``*.yml`` files (not recursing into tests/)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out += sorted(
                p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()
            )
        else:
            out.append(path)
    return out


def load_playbook_files(paths: list[Path]) -> list[Playbook]:
    """Load and validate playbooks from files and directories; PlaybookError lists every problem."""
    books: list[Playbook] = []
    problems: list[str] = []
    cat = {name: a.params for name, a in load_all().items()}
    for path in playbook_paths(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}:1:1: cannot read: {exc}; check the path")
            continue
        try:
            books += load_playbooks_text(text, str(path), cat)
        except PlaybookError as exc:
            problems += exc.problems
    if not problems:
        try:
            check_unique(books)
        except PlaybookError as exc:
            problems += exc.problems
    if problems:
        raise PlaybookError(problems)
    return books
