"""Bounded YAML loading: alias bombs, cycles, depth and size refused at their line; YAML intact."""

from __future__ import annotations

import pytest
import yaml

from tritonguard.core.safe_yaml import YamlLimits, YamlRefused, load_yaml

LAUGHS = "\n".join(
    [
        'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        *(
            f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]"
            for p, n in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)


def _refused(text: str, limits: YamlLimits | None = None) -> YamlRefused:
    with pytest.raises(YamlRefused) as err:
        load_yaml(text, "f.yaml", limits or YamlLimits())
    return err.value


def test_billion_laughs_is_refused_at_the_alias_that_crosses_the_limit() -> None:
    """Nested aliases count as written out: the first alias past the bound is named."""
    err = _refused(LAUGHS, YamlLimits(max_nodes=1000))
    # 10 + 9*10 + 9*91 = 919 nodes by 'c'; the 'd' line's first *c crosses 1000.
    assert (err.line, err.column) == (4, 8)
    assert str(err).startswith("f.yaml:4:8: alias *c expands the document past 1000 values")
    assert "write the values out" in str(err)


def test_many_small_aliases_add_up() -> None:
    """Each alias counts its whole target every time it is used, even at one level."""
    text = "a: &a [1, 2, 3]\nb: [" + ", ".join(["*a"] * 30) + "]\n"
    assert load_yaml(text, "f.yaml", YamlLimits(max_nodes=200))[0].data()["b"][29] == [1, 2, 3]
    err = _refused(text, YamlLimits(max_nodes=100))
    assert err.line == 2 and "alias *a" in err.reason


def test_merge_keys_count_what_they_merge() -> None:
    """'<<: [*a, *a]' chains double at every level, like laughs, and stop the same way."""
    rows = ["a0: &a0 {x: 1, y: 2}"]
    rows += [f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}], k{i}: 1}}" for i in range(1, 40)]
    err = _refused("\n".join(rows))
    assert "alias *a" in err.reason and err.line < 40


@pytest.mark.parametrize(
    ("text", "where"),
    [("a: &a [1, *a]\n", (1, 11)), ("a: &a {self: *a}\n", (1, 14))],
    ids=["sequence", "mapping"],
)
def test_an_alias_inside_its_own_anchor_is_refused(text: str, where: tuple[int, int]) -> None:
    """A recursive document would make any tree walk run forever; it is named, not loaded."""
    err = _refused(text)
    assert (err.line, err.column) == where
    assert "refers to the collection that contains it" in err.reason


def test_deep_nesting_is_refused_before_recursion_runs_out() -> None:
    """Thousands of '[' would exhaust the composer's recursion; the limit stops it first."""
    err = _refused("[" * 5000 + "]" * 5000, YamlLimits(max_depth=20))
    assert (err.line, err.column) == (1, 21) and "20 levels" in err.reason


def test_too_many_plain_values_and_too_many_characters() -> None:
    """Huge documents stop at the node (or character) past the limit, without aliases."""
    err = _refused("[" + ", ".join("1" for _ in range(500)) + "]", YamlLimits(max_nodes=100))
    assert err.line == 1 and "more than 100 values" in err.reason
    err = _refused("a: 1\nb: 2\n" + "c: 3\n" * 100, YamlLimits(max_chars=30))
    assert (err.line, err.column) == (7, 1) and "over the limit of 30" in err.reason


def test_an_absurdly_long_integer_is_a_positioned_yaml_error() -> None:
    """int() of thousands of digits would raise a bare ValueError; here it names the value."""
    (doc,) = load_yaml("x: " + "9" * 5000 + "\n", "f.yaml")
    with pytest.raises(yaml.MarkedYAMLError, match="integer of 5000 digits") as err:
        doc.data()
    assert err.value.problem_mark is not None and err.value.problem_mark.line == 0


def test_ordinary_yaml_loads_exactly_as_safe_load_does() -> None:
    """Anchors, merges, several documents and every scalar type come out unchanged."""
    text = (
        "defaults: &d {scrape_interval_s: 5, labels: [a, b]}\n"
        "target: {<<: *d, name: t0, on: yes, when: 2024-01-02, ratio: .5, big: 0x1F}\n"
        "again: *d\n---\n- 1\n- ~\n"
    )
    docs = load_yaml(text, "f.yaml")
    assert [d.data() for d in docs] == list(yaml.safe_load_all(text))
    assert docs[0].node.start_mark.line == 0 and docs[1].node.start_mark.line == 4


def test_syntax_errors_are_left_to_the_caller() -> None:
    """Malformed YAML raises PyYAML's own positioned error, for each caller to word."""
    with pytest.raises(yaml.MarkedYAMLError):
        load_yaml("a: [1, 2\n", "f.yaml")
    with pytest.raises(yaml.MarkedYAMLError, match="undefined alias"):
        load_yaml("a: *nope\n", "f.yaml")
