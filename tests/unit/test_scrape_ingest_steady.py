"""The steady path of the fused ingest: an exposition laid out as the last one, compared whole."""

from __future__ import annotations

import pytest

from tests.unit.test_ingest_path import CAPTURE_50, TARGET, _reference, _snapshot, _triton_text
from tritonguard.core.exposition import ExpositionError
from tritonguard.core.scrape_ingest import TargetIngest
from tritonguard.core.series_store import SeriesStore


def _advanced(text: str, scrape: int) -> str:
    """Return the capture at a later scrape: every third sample line's value grows."""
    out = []
    for index, line in enumerate(text.split("\n")):
        if line and line[0] != "#" and index % 3 == 0:
            head, _, raw = line.rpartition(" ")
            out.append(f"{head} {float(raw) + 5 * scrape}")
        else:
            out.append(line)
    return "\n".join(out)


def test_steady_scrapes_of_the_capture_store_what_the_reference_path_stores() -> None:
    """Scrape after scrape of the capture, the store ends as the reference path leaves it.

    Some lines change each scrape, most do not; the steady path reads every scrape once
    the layout has held for two and few enough lines changed between them.
    """
    text = CAPTURE_50.read_text()
    fused, reference = SeriesStore(), SeriesStore()
    ingest = TargetIngest(fused, extra_labels=TARGET)
    for k in range(6):
        scrape = _advanced(text, k)
        result = ingest.ingest(scrape, 100.0 + 10 * k)
        _reference(reference, scrape, 100.0 + 10 * k)
        assert _snapshot(fused) == _snapshot(reference), k
        assert result.samples == 2405
    assert ingest.steady_reads == 3 and ingest.slow_reads == 0


def test_a_line_equal_to_last_time_keeps_last_times_value() -> None:
    """An unchanged line stores the value it had; a changed one its new value, NaN included."""
    store = SeriesStore()
    ingest = TargetIngest(store, extra_labels=TARGET)
    base = 'nv_inference_count{{model="a"}} {}\nnv_inference_queue_summary_us{{model="a",quantile="0.99"}} {}\n'
    scrapes = [("1", "5"), ("1", "5"), ("1", "5"), ("1", "5"), ("4", "Nan"), ("4", "7")]
    for k, (count, quantile) in enumerate(scrapes):
        ingest.ingest(base.format(count, quantile), 10.0 * k)
    (counter,) = store.family("nv_inference_count")
    (gauge,) = store.family("nv_inference_queue_summary_us")
    assert list(counter.values) == [1.0, 1.0, 1.0, 1.0, 4.0, 4.0]
    assert list(gauge.values) == [5.0, 5.0, 5.0, 5.0, 7.0]  # the store takes no NaN point
    assert ingest.steady_reads == 3  # from the fourth scrape on: see the capture test


_COUNT_B = 'nv_inference_count{model="b",version="1"}'
_UNREAD = 'unrelated_family{a="b"}'


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        # A comment changed after its type word: the careful path reads the type.
        (("# TYPE nv_inference_count counter", "# TYPE nv_inference_count counter 5"), "type"),
        # A sample that lost its value, leaving the text its value came after.
        ((f"{_COUNT_B} 1014", _COUNT_B), "no value"),
        # A family nothing stores, whose value is no number.
        ((f"{_UNREAD} 12", f"{_UNREAD} x"), "bad value"),
    ],
)
def test_a_changed_line_that_is_not_only_a_new_value_is_refused_with_its_line(
    change: tuple[str, str], reason: str
) -> None:
    """What differs in more than a value is refused by the careful parser, naming the line.

    The store is left as the last good scrape left it.
    """
    store = SeriesStore()
    ingest = TargetIngest(store, extra_labels=TARGET)
    good = _triton_text(1, ["a", "b"], odd=True)
    for t in (10.0, 20.0, 25.0, 28.0):
        ingest.ingest(good, t)
    assert ingest.steady_reads == 1
    before = _snapshot(store)
    old, new = change
    assert old in good
    lineno = good.split("\n").index(old) + 1
    with pytest.raises(ExpositionError, match=reason) as raised:
        ingest.ingest(good.replace(old, new), 30.0)
    assert ingest.steady_reads == 1
    assert raised.value.line == lineno
    assert _snapshot(store) == before


def test_a_series_the_store_dropped_is_looked_up_again_on_an_unchanged_line() -> None:
    """A line whose series expired feeds a new stored series, even though its text is the same."""
    store = SeriesStore(retention_s=30.0)
    ingest = TargetIngest(store, extra_labels=TARGET)
    text = 'nv_inference_queue_summary_us{model="a",quantile="0.99"} 5\nnv_inference_count 1\n'
    ingest.ingest(text, 0.0)
    ingest.ingest(text, 10.0)
    store.expire(100.0)  # both series are past the retention
    ingest.ingest(text, 100.0)
    ingest.ingest(text, 110.0)
    (gauge,) = store.family("nv_inference_queue_summary_us")
    assert list(gauge.times) == [100.0, 110.0]


def test_an_idle_quantile_without_a_value_keeps_the_exposition_steady_until_it_gets_one() -> None:
    """An idle model's NaN quantile (not stored yet) does not stop the steady path.

    Once the quantile has a value it is stored as the reference path stores it.
    """
    line = 'nv_inference_queue_summary_us{model="b",quantile="0.99"} '
    fused, reference = SeriesStore(), SeriesStore()
    ingest = TargetIngest(fused, extra_labels=TARGET)
    for k in range(12):
        text = _triton_text(k, ["a"]) + line + ("Nan" if k < 5 else str(k)) + "\n"
        ingest.ingest(text, 100.0 + 10 * k)
        _reference(reference, text, 100.0 + 10 * k)
        assert _snapshot(fused) == _snapshot(reference), k
    # A layout is compared whole once it held for two scrapes (the second of which is
    # learnt from); it changes where a quantile first has a value: model a's (NaN at
    # scrape 0 in _triton_text) at scrape 1, model b's at scrape 5. Scrapes 4 and 8 to 11
    # are read the steady way.
    assert ingest.steady_reads == 5
    (series,) = (
        s for s in fused.family("nv_inference_queue_summary_us") if ("model", "b") in s.labels
    )
    assert list(series.values) == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]


def test_a_layout_that_moves_and_comes_back_is_stored_as_the_reference_path_stores_it() -> None:
    """Models reordered, then back, then a model added: each scrape matches the reference."""
    fused, reference = SeriesStore(), SeriesStore()
    ingest = TargetIngest(fused, extra_labels=TARGET)
    orders = [["a", "b"]] * 5 + [["b", "a"]] * 5 + [["a", "b"]] * 5 + [["a", "b", "c"]] * 5
    for k, models in enumerate(orders):
        text = _triton_text(k, models)
        ingest.ingest(text, 100.0 + 10 * k)
        _reference(reference, text, 100.0 + 10 * k)
        assert _snapshot(fused) == _snapshot(reference), k
    assert ingest.steady_reads > 0 and ingest.slow_reads == 0


def _busy_text(scrape: int, *, idle_quantile: bool = True) -> str:
    """Return a Triton exposition whose every sample line changes each scrape but a NaN one."""
    out = ["# TYPE nv_inference_count counter"]
    for model in "abcdefgh":
        out.append(f'nv_inference_count{{model="{model}",version="1"}} {scrape * 7}')
        out.append(f'nv_inference_queue_summary_us_count{{model="{model}"}} {scrape * 3}')
        out.append(f'nv_inference_queue_summary_us{{model="{model}",quantile="0.5"}} {scrape}.5')
    if idle_quantile:
        out.append('nv_inference_queue_summary_us{model="z",quantile="0.5"} NaN')
    return "\n".join(out) + "\n"


def test_an_exposition_whose_lines_mostly_change_is_read_line_by_line_for_a_while() -> None:
    """Past STEADY_SHARE changed lines a target is read line by line, trying again later.

    Each try that does not pay doubles the wait; once the exposition calms down the whole
    compare comes back. Every scrape leaves the store as the reference path does, unread
    families and a series waiting for a value included.
    """
    from tritonguard.core.scrape_ingest import STEADY_WAIT

    fused, reference = SeriesStore(), SeriesStore()
    ingest = TargetIngest(fused, extra_labels=TARGET)
    for k in range(35):
        # Busy until scrape 12, then only one model's counter grows.
        text = _busy_text(k) if k <= 12 else _busy_text(12).replace(" 84\n", f" {k * 7}\n", 1)
        ingest.ingest(text, 100.0 + 10 * k)
        _reference(reference, text, 100.0 + 10 * k)
        assert _snapshot(fused) == _snapshot(reference), k
        if k == 12:
            # Scrape 1 offered the layout, 2 found nearly every line changed: 8 scrapes
            # line by line, 11 offered it again, 12 found the same: 16 more.
            assert ingest.steady_reads == 0
    # Scrapes 13 to 28 line by line, 29 offers the layout, 30 builds it: 31 to 34 compare.
    assert STEADY_WAIT == 8
    assert ingest.steady_reads == 4 and ingest.slow_reads == 0
