"""ConfigMap changes before an incident: the data keys of a mounted ConfigMap, diffed between reads.

Pure. A Triton pod often mounts its model repository, or part of it (``config.pbtxt``, a
labels file), from a ConfigMap: editing it changes what the server loads without any rollout.
Discovery hands in each read of a ConfigMap a target pod mounts (its resourceVersion and data);
this module says what changed against the read before, key by key: a short value shown whole,
a multi-line text as the lines that changed (``config.pbtxt:12: … → …``), a large or binary
value only by its size and digest, never dumped; and a key or line that looks like a secret
(``auth_token``, ``password: …``) as changed, never as itself, the way rollout diffs hide them.
The change is kept per pod, so an incident on a pod that mounts the ConfigMap names it:
``ConfigMap models-config key config.pbtxt changed 40 s before onset``.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import threading
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tritonguard.core.change_text import HIDDEN, SECRET_ASSIGN, SECRETISH, changes_line, leaves_line
from tritonguard.core.config_patch import Change
from tritonguard.core.urls import redact_text

# A value longer than this is compared and shown by its size and digest only: a model file
# or a vocabulary is no line-by-line reading for an on-call engineer, and holding it for
# every mounted ConfigMap would cost the daemon its memory.
MAX_TEXT_CHARS = 64 * 1024
# Changed lines kept per change; the rest are counted.
MAX_LEAVES = 24
# A line is shown at most this wide on each side of the arrow.
SHOWN_WIDTH = 60
# ConfigMaps whose last read is kept, and pods whose changes are. A ConfigMap holds up to
# 1 MiB, so the reads held are bounded by their total size too: past it the oldest read goes
# (its next change is then only remembered, not diffed).
MAX_MAPS = 1024
MAX_HELD_CHARS = 32 * 1024 * 1024
MAX_PODS = 4096
# Changes kept per pod: the newest are what an incident follows.
MAX_PER_POD = 4
# Past this many line pairs left once the common head and tail are set aside, the lines
# that changed are found by counting (linear) rather than by aligning the two texts: an
# alignment of thousands of repeated lines (``}``, ``dims: [ -1 ]``) takes seconds to minutes.
MAX_ALIGNED_PAIRS = 200_000
# Data keys that name a private key or a key store by their file type: shown by size only.
# (A certificate, ``.crt``, is public; a PEM block in any value is caught by its header.)
SECRET_FILE = re.compile(r"\.(?:key|pem|p12|pfx|jks|keystore)$", re.I)
PEM_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]*-----")
# A protobuf-text ``key: "hf_token"`` (Triton's ``parameters``): its value follows in the
# next lines, a ``value: { string_value: … }`` block.
_PBTXT_KEY = re.compile(r"""^\s*key\s*:\s*["']?([^"'\s]+)["']?(.*)$""")
# A key whose value starts on the next line: ``hf_token:`` alone, or opening a block.
_OPENS_BLOCK = re.compile(r"^\s*(?:[|>][-+]?|[{\[(])?\s*$")
# Lines hidden after a secret key at most, should its block never close.
_MAX_HIDDEN_RUN = 16


@dataclass(frozen=True, slots=True)
class ConfigMapData:
    """One read of a ConfigMap: its resourceVersion, text data and binaryData (base64 text)."""

    namespace: str
    name: str
    resource_version: str
    data: Mapping[str, str] = field(default_factory=dict)
    binary_data: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfigMapChange:
    """A mounted ConfigMap's data as it changed between two reads.

    ``at_earliest`` is the last moment the old data was known to hold, ``at_latest`` when the
    new data was read. ``keys`` are the data keys that changed; ``changes`` what is shown of
    them, one per short value or changed line, ``untold`` the changed lines not kept.
    """

    namespace: str
    name: str
    at_earliest: float
    at_latest: float
    resource_version: str
    previous_version: str
    keys: tuple[str, ...]
    changes: tuple[Change, ...]
    untold: int = 0
    # Changed keys not listed in ``keys``: only a trace cuts them (its lines are bounded).
    untold_keys: int = 0

    def headline(self) -> str:
        """Return which ConfigMap and keys: ``ConfigMap models-config key config.pbtxt``."""
        noun = "key" if len(self.keys) + self.untold_keys == 1 else "keys"
        listed = leaves_line(self.keys, sep=", ", untold=self.untold_keys)
        return f"ConfigMap {self.name} {noun} {listed}"

    def diff_text(self) -> str:
        """Return what changed in one line, the first few leaves."""
        return changes_line(self.changes, width=SHOWN_WIDTH, untold=self.untold)

    def summary(self) -> str:
        """Return the change and its diff in one line."""
        return f"{self.headline()} changed ({self.diff_text()})"

    def timing(self, onset: float) -> str:
        """Return when it was seen against ``onset``: ``changed 40 s before onset``."""
        lead = round(onset - self.at_latest)
        if lead > 0:
            return f"{self.headline()} changed {lead} s before onset"
        return f"{self.headline()} changed at onset"

    def as_dict(self, onset: float | None = None) -> dict[str, Any]:
        """Return the JSON form; with ``onset``, how long before it the change was read."""
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "name": self.name,
            "keys": list(self.keys),
            "resource_version": self.resource_version,
            "previous_version": self.previous_version,
            "at_earliest": round(self.at_earliest, 3),
            "at_latest": round(self.at_latest, 3),
            "summary": self.summary(),
            "changes": [c.as_dict() for c in self.changes],
            "untold": self.untold,
        }
        if self.untold_keys:
            out["untold_keys"] = self.untold_keys
        if onset is not None:
            out["seen_before_onset_s"] = round(onset - self.at_latest, 3)
        return out


# A held value is the text itself, or for a large or binary one what can be said of it.
# The marker starts with a NUL, which no text value holds (those are read as binary).
_OPAQUE = "\0"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _held(value: str, *, binary: bool) -> str:
    """Return what is kept of a value: short text whole, anything else its size and digest."""
    if binary:
        size = len(value) * 3 // 4 - value[-2:].count("=")
        return f"{_OPAQUE}binary, {size} bytes, sha256 {_digest(value)}"
    if "\0" in value or len(value) > MAX_TEXT_CHARS:
        return f"{_OPAQUE}{len(value)} characters, sha256 {_digest(value)}"
    return value


def _hide(line: str) -> str:
    """Return a line with a secret's value (``token=…``, a URL's userinfo) hidden."""
    line = redact_text(line.strip())
    m = SECRET_ASSIGN.search(line)
    if m is None:
        return line
    rest = line[m.end() :]
    return line[: m.end()] + rest[: len(rest) - len(rest.lstrip())] + HIDDEN


def _depth(text: str) -> int:
    return text.count("{") + text.count("[") - text.count("}") - text.count("]")


def _secret_lines(lines: list[str]) -> set[int]:
    """Return the indexes of lines that hold a secret named on a line before them.

    ``key: "hf_token"`` then ``value: { string_value: "hf_…" }`` (Triton's ``parameters``):
    the lines up to the value block's end. ``hf_token:`` with nothing after it (YAML, a
    block opened): the lines indented deeper than it. Both err towards hiding.
    """
    hidden: set[int] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        pb = _PBTXT_KEY.match(line)
        if pb is not None and SECRETISH.search(pb.group(1)):
            depth = _depth(pb.group(2))
            opened = depth > 0 or "value" in pb.group(2)
            j = i + 1
            while j < len(lines) and j <= i + _MAX_HIDDEN_RUN:
                if not opened and _PBTXT_KEY.match(lines[j]):
                    break  # a key with no value: the next one is not its value
                hidden.add(j)
                depth += _depth(lines[j])
                opened = opened or depth > 0 or "value" in lines[j]
                j += 1
                if opened and depth <= 0:
                    break
            i = j
            continue
        m = SECRET_ASSIGN.search(line)
        if m is not None and _OPENS_BLOCK.match(line[m.end() :]):
            indent = len(line) - len(line.lstrip())
            j = i + 1
            while j < len(lines) and j <= i + _MAX_HIDDEN_RUN:
                nxt = lines[j]
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                    if _depth(line[m.end() :]) <= 0 or nxt.strip()[:1] not in "}])":
                        break
                    hidden.add(j)  # the bracket closing the block
                    j += 1
                    break
                hidden.add(j)
                j += 1
            i = j
            continue
        i += 1
    return hidden


def _hidden_line(lines: list[str], hidden: set[int], i: int) -> str:
    return HIDDEN if i in hidden else _hide(lines[i])


def _is_secret(key: str, *values: str | None) -> bool:
    """Whether a key's value is a secret as a whole: its name says so, or it holds a PEM key."""
    if SECRETISH.search(key) or SECRET_FILE.search(key):
        return True
    return any(v is not None and PEM_BLOCK.search(v) is not None for v in values)


def _value_changes(key: str, old: str | None, new: str | None) -> list[Change]:
    """Return what is shown of one key's change: the value, its changed lines, or its size."""
    if _is_secret(key, old, new):
        return [
            Change(
                key,
                None if old is None else f"{HIDDEN} ({len(old)} characters)",
                None if new is None else f"{HIDDEN} ({len(new)} characters)",
            )
        ]
    opaque = [v for v in (old, new) if v is not None and v.startswith(_OPAQUE)]
    if opaque or old is None or new is None:
        return [Change(key, _shown_whole(old), _shown_whole(new))]
    before, after = old.splitlines(), new.splitlines()
    if len(before) <= 1 and len(after) <= 1:
        return [Change(key, _hide(old), _hide(new))]
    hid_a, hid_b = _secret_lines(before), _secret_lines(after)
    # The head and tail both texts share are set aside first: an edit is usually a few lines.
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(before), len(after)) - head
        and before[len(before) - 1 - tail] == after[len(after) - 1 - tail]
    ):
        tail += 1
    mid_a, mid_b = before[head : len(before) - tail], after[head : len(after) - tail]
    out: list[Change] = []
    if len(mid_a) * len(mid_b) > MAX_ALIGNED_PAIRS:
        out = _counted_changes(key, before, after, (head, tail), (hid_a, hid_b))
        if not out:
            # The same lines, only in another order: counting cannot place them.
            moved = f"{len(mid_b)} lines reordered from line {head + 1}"
            return [Change(key, f"{len(old)} characters", f"{len(new)} characters, {moved}")]
    else:
        matcher = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
        for tag, a1, a2, b1, b2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            i1, i2, j1, j2 = a1 + head, a2 + head, b1 + head, b2 + head
            for k in range(max(i2 - i1, j2 - j1)):
                line = j1 + k + 1 if k < j2 - j1 else i1 + k + 1
                a = _hidden_line(before, hid_a, i1 + k) if k < i2 - i1 else None
                b = _hidden_line(after, hid_b, j1 + k) if k < j2 - j1 else None
                out.append(Change(f"{key}:{line}", a, b))
    if not out:
        # Only line ends moved (a trailing newline added): say so rather than nothing.
        out.append(Change(key, f"{len(old)} characters", f"{len(new)} characters"))
    return out


def _counted_changes(
    key: str,
    before: list[str],
    after: list[str],
    ends: tuple[int, int],
    hidden: tuple[set[int], set[int]],
) -> list[Change]:
    """Return the lines removed and added, found by counting each line's copies (linear).

    No alignment pairs an old line with its new one, so each is told alone: a removed line
    at its old number, an added one at its new number, in order.
    """
    head, tail = ends
    mid_a = range(head, len(before) - tail)
    mid_b = range(head, len(after) - tail)
    count_a = Counter(before[i] for i in mid_a)
    count_b = Counter(after[j] for j in mid_b)
    removed, added = count_a - count_b, count_b - count_a
    out: list[tuple[int, Change]] = []
    for i in mid_a:
        if removed[before[i]] > 0:
            removed[before[i]] -= 1
            out.append((i, Change(f"{key}:{i + 1}", _hidden_line(before, hidden[0], i), None)))
    for j in mid_b:
        if added[after[j]] > 0:
            added[after[j]] -= 1
            out.append((j, Change(f"{key}:{j + 1}", None, _hidden_line(after, hidden[1], j))))
    out.sort(key=lambda pair: pair[0])
    return [change for _, change in out]


def _shown_whole(value: str | None) -> str | None:
    """Return a whole value as shown: its size and digest when opaque, else its first line."""
    if value is None:
        return None
    if value.startswith(_OPAQUE):
        return f"({value[1:]})"
    lines = value.splitlines()
    if len(lines) > 1:
        return f"({len(lines)} lines, {len(value)} characters)"
    return _hide(value)


def shown_again(key: str, value: str | None) -> str | None:
    """Return a value as the daemon would show it, whatever wrote it (a trace by hand).

    A secret-looking key's value is hidden, a secret inside a line too; a multi-line value
    is its size, a binary or over-long one its size and digest. Values already shown that way
    read the same again.
    """
    if value is None:
        return None
    if _is_secret(key, value):
        return value if value.startswith(HIDDEN) else f"{HIDDEN} ({len(value)} characters)"
    return _shown_whole(_held(value, binary=False))


def _held_data(read: ConfigMapData) -> dict[str, str]:
    held = {str(k): _held(str(v), binary=False) for k, v in read.data.items()}
    held.update({str(k): _held(str(v), binary=True) for k, v in read.binary_data.items()})
    return held


def data_diff(
    before: Mapping[str, str], after: Mapping[str, str]
) -> tuple[tuple[str, ...], list[Change]]:
    """Return the keys whose values differ and what is shown of each (held values, see above)."""
    keys = tuple(sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)))
    changes = [c for k in keys for c in _value_changes(k, before.get(k), after.get(k))]
    return keys, changes


@dataclass(slots=True)
class _Read:
    version: str
    at: float
    data: dict[str, str]

    @property
    def size(self) -> int:
        return sum(len(k) + len(v) for k, v in self.data.items())


class ConfigMapReads:
    """The last read of each mounted ConfigMap, and the change each new read shows.

    Safe to use from a worker thread beside the event loop: the reads held change under a
    lock, and the diff, the slow part, runs outside it on data no one else changes.
    """

    def __init__(self, max_maps: int = MAX_MAPS, max_chars: int = MAX_HELD_CHARS) -> None:
        self._last: dict[tuple[str, str], _Read] = {}
        self._max = max_maps
        self._max_chars = max_chars
        self._held = 0
        self._lock = threading.Lock()

    def known(self, namespace: str, name: str) -> bool:
        """Whether a read of this ConfigMap is held (a later one can be diffed against it)."""
        with self._lock:
            return (namespace, name) in self._last

    def read(
        self, read: ConfigMapData, at: float, *, unchanged_until: float | None = None
    ) -> ConfigMapChange | None:
        """Take one read at ``at``; return the change since the last one, or None.

        The first read of a ConfigMap is only remembered. ``unchanged_until`` is when the old
        data was last known to hold (a watch in sync until then); else the last read's time.
        A read with the version already held says nothing, and one whose data is the same
        (labels or annotations edited) only moves the version on.
        """
        key = (read.namespace, read.name)
        data = _held_data(read)
        held = _Read(read.resource_version, at, data)
        with self._lock:
            last = self._last.pop(key, None)
            if last is not None:
                self._held -= last.size
            while self._last and (
                len(self._last) >= self._max or self._held + held.size > self._max_chars
            ):
                self._held -= self._last.pop(next(iter(self._last))).size
            self._last[key] = held
            self._held += held.size
            if last is None:
                return None
            if last.version == read.resource_version:
                held.at = max(at, last.at)
                return None
        keys, changes = data_diff(last.data, data)
        if not keys:
            return None
        since = last.at if unchanged_until is None else max(last.at, min(unchanged_until, at))
        return ConfigMapChange(
            namespace=read.namespace,
            name=read.name,
            at_earliest=since,
            at_latest=at,
            resource_version=read.resource_version,
            previous_version=last.version,
            keys=keys,
            changes=tuple(changes[:MAX_LEAVES]),
            untold=max(0, len(changes) - MAX_LEAVES),
        )

    def forget(self, namespace: str, name: str) -> None:
        """Drop a ConfigMap no target pod mounts any more."""
        with self._lock:
            gone = self._last.pop((namespace, name), None)
            if gone is not None:
                self._held -= gone.size

    def __len__(self) -> int:
        return len(self._last)


class ConfigMapTimeline:
    """The ConfigMap changes each pod saw, by ``(namespace, pod)``, the newest last."""

    def __init__(self, max_pods: int = MAX_PODS) -> None:
        self._by_pod: dict[tuple[str, str], deque[ConfigMapChange]] = {}
        self._max = max_pods

    def note(self, namespace: str, pod: str, change: ConfigMapChange) -> bool:
        """Remember a change of a ConfigMap the pod mounts; return whether it is news."""
        key = (namespace, pod)
        held = self._by_pod.pop(key, None)
        if held is None:
            if len(self._by_pod) >= self._max:
                del self._by_pod[next(iter(self._by_pod))]
            held = deque(maxlen=MAX_PER_POD)
        self._by_pod[key] = held
        if change in held:
            return False
        held.append(change)
        return True

    def preceding(
        self, namespace: str, pod: str, onset: float, lookback_s: float
    ) -> ConfigMapChange | None:
        """Return the newest change that may have happened before ``onset``, within lookback."""
        for change in reversed(self._by_pod.get((namespace, pod), ())):
            if change.at_earliest <= onset and change.at_latest >= onset - lookback_s:
                return change
        return None

    def forget(self, namespace: str, pod: str) -> None:
        """Drop a pod that is gone."""
        self._by_pod.pop((namespace, pod), None)

    def __len__(self) -> int:
        return len(self._by_pod)
