"""A subject's string key (audit rows, cooldowns, records) names the subject it was made from."""

from __future__ import annotations

import pytest

from tritonguard.core.findings import Subject


@pytest.mark.parametrize(
    "subject",
    [
        Subject("search", "embedder", "triton-0"),
        Subject("search", "embedder"),
        Subject("ml", "org/team/llm", "triton-7"),
    ],
    ids=("pod", "every pod", "slashes in the model"),
)
def test_a_key_names_its_subject_again(subject: Subject) -> None:
    """``from_key(key())`` is the subject: a group's ``*`` pod, a model name with slashes."""
    assert Subject.from_key(subject.key()) == subject


@pytest.mark.parametrize("key", ["", "search", "search/triton-0", "/triton-0/m", "search/*/"])
def test_a_key_that_names_no_subject_is_none(key: str) -> None:
    """A key without a namespace, a pod part or a model names nothing; no half subject."""
    assert Subject.from_key(key) is None
