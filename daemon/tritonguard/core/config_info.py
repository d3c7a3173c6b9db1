"""Changes inside a trace: info series, so replay and playbook tests see what the daemon sees.

The daemon reads configs from Triton's repository API and rollouts from the Kubernetes API; a
trace has neither to ask. It records them as samples of two info series, the trace's own (a
Triton never exposes them, and the engine never stores them as metrics):

- ``tritonguard_model_config_info{namespace, pod, model, config}``: one config read, at the
  time of the read; ``config`` holds the config as compact JSON.
- ``tritonguard_rollout_info{namespace, pod, workload_kind, workload, revision,
  revision_name, previous, previous_name, rollout_at, changes}``: the workload revision a pod
  runs, at the time discovery saw it. ``revision`` and ``previous`` are numbers or empty
  (unknown, none kept); ``rollout_at`` is when the revision began (unix seconds);
  ``changes`` is the pod-template diff against ``previous`` as compact JSON, a list of
  ``[path, old, new]`` (each value a string, a list of words or null), with secrets already
  hidden as the daemon hides them, and hidden again on reading.
- ``tritonguard_config_map_info{namespace, pod, config_map, resource_version,
  previous_version, changed_at_earliest, changed_at, keys, untold_keys, changes, untold}``:
  a change of a ConfigMap the pod mounts, at the time discovery read it. ``keys`` are the
  changed data keys, comma-separated; ``changes`` is what the daemon shows of them as compact
  JSON, ``[[path, old, new], ...]`` (``path`` a key or ``key:line``, each value a string or
  null), secret-looking values hidden, large or binary ones by size and digest, and shown
  again that way on reading. A trace line is bounded, so a long value is written by its size
  and digest and the changes or keys past the line's room are counted (``untold``,
  ``untold_keys``).

Replaying the trace feeds each to the engine as the daemon would (``note_trace_info``), so an
incident after a config change or a rollout names it there too. A malformed sample is refused
with what is wrong (``ValueError``); the trace reader adds its file and line.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tritonguard.core.change_text import HIDDEN, SECRETISH
from tritonguard.core.config_map_changes import MAX_LEAVES, ConfigMapChange, shown_again
from tritonguard.core.config_patch import Change
from tritonguard.core.findings import Subject
from tritonguard.core.rollout_changes import RolloutChange, hide_words
from tritonguard.core.samples import Sample, label, make_labels

if TYPE_CHECKING:
    from tritonguard.core.config_changes import ConfigChange
    from tritonguard.core.engine import Engine

CONFIG_INFO = "tritonguard_model_config_info"
ROLLOUT_INFO = "tritonguard_rollout_info"
CONFIG_MAP_INFO = "tritonguard_config_map_info"
# The info series a trace may carry besides metrics.
TRACE_INFO = frozenset({CONFIG_INFO, ROLLOUT_INFO, CONFIG_MAP_INFO})
# A model config is a few KB; a label far larger is not one (and JSON nesting is bounded by
# the parser's own limit on a label's length before it gets here).
MAX_CONFIG_CHARS = 256 * 1024
# A pod-template diff is a few leaves per container; more is not one the daemon wrote.
MAX_ROLLOUT_CHANGES = 256
MAX_CHANGES_CHARS = 64 * 1024
# A trace line is at most 64 Ki characters (the reader's bound). A ConfigMap sample keeps
# its diff and keys within these, escaped as written, so the daemon never records a line
# replay refuses; a shown value longer than MAX_TRACE_VALUE_CHARS goes by size and digest.
MAX_MAP_CHANGES_CHARS = 32 * 1024
MAX_MAP_KEYS_CHARS = 8 * 1024
MAX_TRACE_VALUE_CHARS = 1024
# Kubernetes' own shapes: a ConfigMap's name (a DNS subdomain) and its data keys.
_MAP_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
_DIGITS = re.compile(r"[0-9]{1,9}")


def config_sample(subject: Subject, config: Mapping[str, Any], at: float) -> Sample:
    """Return the trace sample recording one config read of ``subject`` at ``at``."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    labels = make_labels(
        {
            "namespace": subject.namespace,
            "pod": subject.pod,
            "model": subject.model,
            "config": text,
        }
    )
    return Sample(CONFIG_INFO, labels, 1.0, at)


def read_config_sample(sample: Sample) -> tuple[Subject, dict[str, Any]]:
    """Return the subject and config a trace sample records; ValueError says what is wrong."""
    model = label(sample.labels, "model")
    where = f"{CONFIG_INFO} at {sample.timestamp}"
    if not model:
        raise ValueError(f"{where}: no model label; each read names its model")
    text = label(sample.labels, "config")
    if len(text) > MAX_CONFIG_CHARS:
        raise ValueError(f"{where}: config of {len(text)} characters, over {MAX_CONFIG_CHARS}")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{where} ({model}): the config label is not JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except RecursionError:
        raise ValueError(f"{where} ({model}): the config label nests too deeply") from None
    if not isinstance(config, dict):
        raise ValueError(f"{where} ({model}): the config label is not a JSON object")
    subject = Subject(label(sample.labels, "namespace"), model, label(sample.labels, "pod"))
    return subject, config


def rollout_sample(pod: str, rollout: RolloutChange) -> Sample:
    """Return the trace sample recording that ``pod`` runs ``rollout``, at its ``seen_at``."""
    changes = [[c.path, c.old, c.new] for c in rollout.changes]
    labels = make_labels(
        {
            "namespace": rollout.namespace,
            "pod": pod,
            "workload_kind": rollout.kind,
            "workload": rollout.workload,
            "revision": "" if rollout.revision is None else str(rollout.revision),
            "revision_name": rollout.revision_name,
            "previous": "" if rollout.previous is None else str(rollout.previous),
            "previous_name": rollout.previous_name or "",
            "rollout_at": repr(float(rollout.at)),
            "changes": json.dumps(changes, separators=(",", ":")),
        }
    )
    return Sample(ROLLOUT_INFO, labels, 1.0, rollout.seen_at)


def _number(where: str, name: str, text: str) -> int | None:
    if not text:
        return None
    if not text.isdigit():
        raise ValueError(f"{where}: label {name}={text!r} is not a revision number (or empty)")
    return int(text)


def _leaf(where: str, value: Any) -> str | list[str] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(w, str) for w in value):
        return list(value)
    raise ValueError(f"{where}: a changed value must be a string, a list of strings or null")


def _safe(path: str, value: str | list[str] | None) -> str | list[str] | None:
    """Hide a secret again: a trace may have been written by hand, or by an older daemon."""
    if isinstance(value, list):
        return hide_words(value)
    if value is not None and ".env." in path and SECRETISH.search(path.rsplit(".", 1)[-1]):
        return value if value.startswith(HIDDEN) else HIDDEN
    return value


def _change_entries(
    where: str, text: str, max_chars: int, max_entries: int, rest: str = ""
) -> list[list[Any]]:
    """Read a diff label's ``[[path, old, new], ...]`` JSON, bounded; ValueError names the fault.

    ``rest`` says where entries past ``max_entries`` go, for the label that counts them.
    """
    text = text or "[]"
    if len(text) > max_chars:
        raise ValueError(f"{where}: changes of {len(text)} characters, over {max_chars}")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{where}: the changes label is not JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except RecursionError:
        raise ValueError(f"{where}: the changes label nests too deeply") from None
    if not isinstance(raw, list) or len(raw) > max_entries:
        raise ValueError(
            f"{where}: changes must be a JSON list of at most {max_entries} "
            f"[path, old, new] entries{rest}"
        )
    for entry in raw:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)):
            raise ValueError(f"{where}: each change must be [path, old, new], not {entry!r:.60}")
    return raw


def read_rollout_sample(sample: Sample) -> tuple[str, RolloutChange]:
    """Return the pod and rollout a trace sample records; ValueError says what is wrong."""
    where = f"{ROLLOUT_INFO} at {sample.timestamp}"
    get = {
        name: label(sample.labels, name)
        for name in (
            "namespace",
            "pod",
            "workload_kind",
            "workload",
            "revision",
            "revision_name",
            "previous",
            "previous_name",
            "rollout_at",
            "changes",
        )
    }
    for required in ("pod", "workload_kind", "workload", "revision_name", "rollout_at"):
        if not get[required]:
            raise ValueError(f"{where}: no {required} label; each rollout sample names it")
    if get["workload_kind"] not in ("Deployment", "StatefulSet"):
        raise ValueError(
            f"{where}: workload_kind={get['workload_kind']!r}; Deployment or StatefulSet"
        )
    try:
        at = float(get["rollout_at"])
    except ValueError:
        at = math.nan
    if not math.isfinite(at):
        raise ValueError(f"{where}: rollout_at={get['rollout_at']!r} is not unix seconds")
    changes: list[Change] = []
    for entry in _change_entries(where, get["changes"], MAX_CHANGES_CHARS, MAX_ROLLOUT_CHANGES):
        path = entry[0]
        changes.append(
            Change(path, _safe(path, _leaf(where, entry[1])), _safe(path, _leaf(where, entry[2])))
        )
    seen_at = sample.timestamp if sample.timestamp is not None else at
    rollout = RolloutChange(
        namespace=get["namespace"],
        kind=get["workload_kind"],
        workload=get["workload"],
        revision=_number(where, "revision", get["revision"]),
        revision_name=get["revision_name"],
        at=min(at, seen_at),
        seen_at=seen_at,
        changes=tuple(changes),
        previous=_number(where, "previous", get["previous"]),
        previous_name=get["previous_name"] or None,
    )
    return get["pod"], rollout


def _escaped_len(text: str) -> int:
    """Return the length of ``text`` as a label value in the exposition (escapes counted)."""
    return len(text) + text.count("\\") + text.count('"') + text.count("\n")


def _trace_value(value: str | None) -> str | None:
    """Return a shown value as a trace line can hold it: a long one by size and digest."""
    if value is None or len(value) <= MAX_TRACE_VALUE_CHARS:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"({len(value)} characters, sha256 {digest})"


def _compact(value: Any) -> str:
    # ASCII: a lone surrogate in a ConfigMap's text (JSON allows one) must not stop the
    # trace from being written as UTF-8; the room a line has is measured on this text.
    return json.dumps(value, separators=(",", ":"))


def config_map_sample(pod: str, change: ConfigMapChange) -> Sample:
    """Return the trace sample recording that ``pod`` saw ``change``, at when it was read.

    It carries what the daemon shows and no more: the shown changes (long values by size
    and digest), as many as a trace line has room for, the rest counted.
    """
    keys: list[str] = []
    room = MAX_MAP_KEYS_CHARS
    for key in change.keys:
        room -= len(key) + 1
        if room < 0:
            break
        keys.append(key)
    listed = set(keys)
    entries: list[list[str | None]] = []
    used = 2  # the list's brackets
    for c in change.changes:
        old = c.old if c.old is None else str(c.old)
        new = c.new if c.new is None else str(c.new)
        entry = [c.path, _trace_value(old), _trace_value(new)]
        cost = _escaped_len(_compact(entry)) + 1
        # A change of a key the line has no room to list is counted, as the reader needs.
        if c.path.partition(":")[0] not in listed or used + cost > MAX_MAP_CHANGES_CHARS:
            break
        entries.append(entry)
        used += cost
    labels = make_labels(
        {
            "namespace": change.namespace,
            "pod": pod,
            "config_map": change.name,
            "resource_version": change.resource_version,
            "previous_version": change.previous_version,
            "changed_at_earliest": repr(float(change.at_earliest)),
            "changed_at": repr(float(change.at_latest)),
            "keys": ",".join(keys),
            "untold_keys": str(change.untold_keys + len(change.keys) - len(keys)),
            "changes": _compact(entries),
            "untold": str(change.untold + len(change.changes) - len(entries)),
        }
    )
    return Sample(CONFIG_MAP_INFO, labels, 1.0, change.at_latest)


def _seconds(where: str, name: str, text: str) -> float:
    try:
        at = float(text)
    except ValueError:
        at = math.nan
    if not math.isfinite(at):
        raise ValueError(f"{where}: {name}={text!r:.40} is not unix seconds")
    return at


def _count(where: str, name: str, text: str) -> int:
    if not text:
        return 0
    if _DIGITS.fullmatch(text) is None:
        raise ValueError(f"{where}: label {name}={text!r:.40} is not a count (or empty)")
    return int(text)


def _map_changes(where: str, text: str, keys: tuple[str, ...]) -> tuple[Change, ...]:
    """Read a ConfigMap diff label: ``[[path, old, new], ...]``, each path one of ``keys``."""
    out: list[Change] = []
    entries = _change_entries(
        where, text, MAX_MAP_CHANGES_CHARS, MAX_LEAVES, " (count the rest in untold)"
    )
    for entry in entries:
        path, old, new = entry
        key, _, line = path.partition(":")
        if key not in keys or (line and _DIGITS.fullmatch(line) is None):
            raise ValueError(
                f"{where}: change path {path!r:.60} is not one of the keys label's keys, "
                "alone or as key:line"
            )
        if not all(v is None or isinstance(v, str) for v in (old, new)):
            raise ValueError(f"{where}: a changed value must be a string or null ({path!r:.60})")
        # Shown as the daemon would and as its trace would hold it, whoever wrote the line.
        shown = [_trace_value(shown_again(key, v)) for v in (old, new)]
        out.append(Change(path, shown[0], shown[1]))
    return tuple(out)


def read_config_map_sample(sample: Sample) -> tuple[str, ConfigMapChange]:
    """Return the pod and ConfigMap change a trace sample records; ValueError says what is wrong."""
    where = f"{CONFIG_MAP_INFO} at {sample.timestamp}"
    get = dict(sample.labels)
    for required in ("pod", "config_map", "resource_version", "changed_at", "keys"):
        if not get.get(required):
            raise ValueError(f"{where}: no {required} label; each ConfigMap sample names it")
    name = get["config_map"]
    if _MAP_NAME.fullmatch(name) is None:
        raise ValueError(f"{where}: config_map={name!r:.60} is not a ConfigMap name")
    keys = tuple(get["keys"].split(","))
    if len(get["keys"]) > MAX_MAP_KEYS_CHARS or not all(_MAP_KEY.fullmatch(k) for k in keys):
        raise ValueError(
            f"{where}: keys={get['keys']!r:.60} is not a comma-separated list of ConfigMap "
            f"keys (letters, digits, '-', '_', '.'), at most {MAX_MAP_KEYS_CHARS} characters"
        )
    at = _seconds(where, "changed_at", get["changed_at"])
    earliest = _seconds(where, "changed_at_earliest", get.get("changed_at_earliest") or str(at))
    if earliest > at:
        raise ValueError(
            f"{where}: changed_at_earliest={earliest!r} is after changed_at={at!r}; the old "
            "data held until the earlier one"
        )
    seen_at = sample.timestamp if sample.timestamp is not None else at
    latest = min(at, seen_at)
    change = ConfigMapChange(
        namespace=get.get("namespace", ""),
        name=name,
        at_earliest=min(earliest, latest),
        at_latest=latest,
        resource_version=get["resource_version"],
        previous_version=get.get("previous_version", ""),
        keys=keys,
        changes=_map_changes(where, get.get("changes", ""), keys),
        untold=_count(where, "untold", get.get("untold", "")),
        untold_keys=_count(where, "untold_keys", get.get("untold_keys", "")),
    )
    return get["pod"], change


def check_trace_info(sample: Sample) -> None:
    """Raise ValueError if an info sample of a trace cannot be read (what is wrong, and where)."""
    if sample.name == CONFIG_INFO:
        read_config_sample(sample)
    elif sample.name == ROLLOUT_INFO:
        read_rollout_sample(sample)
    elif sample.name == CONFIG_MAP_INFO:
        read_config_map_sample(sample)


def note_trace_info(engine: Engine, sample: Sample) -> None:
    """Give the engine what an info sample records, as the daemon gives it its reads."""
    if sample.name == CONFIG_INFO:
        subject, config = read_config_sample(sample)
        engine.note_model_config(subject, config, at=sample.timestamp)
    elif sample.name == ROLLOUT_INFO:
        pod, rollout = read_rollout_sample(sample)
        engine.note_rollout(rollout.namespace, pod, rollout)
    elif sample.name == CONFIG_MAP_INFO:
        pod, mounted = read_config_map_sample(sample)
        engine.note_config_map(mounted.namespace, pod, mounted)


def change_samples(subject: Subject, change: ConfigChange) -> list[Sample]:
    """Return the samples that make a trace replay to ``change`` on ``subject``.

    The two config reads it lies between (when it changed the model config), the rollout
    the pod came from and the change of a ConfigMap it mounts: what an incident's own trace
    needs to name the same change again.
    """
    out: list[Sample] = []
    if change.changes:
        out.append(config_sample(subject, change.before, change.at_earliest))
        out.append(config_sample(subject, change.after, change.at_latest))
    if change.rollout is not None and subject.pod:
        out.append(rollout_sample(subject.pod, change.rollout))
    if change.config_map is not None and subject.pod:
        out.append(config_map_sample(subject.pod, change.config_map))
    return out
