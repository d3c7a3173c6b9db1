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

Replaying the trace feeds each to the engine as the daemon would (``note_trace_info``), so an
incident after a config change or a rollout names it there too. A malformed sample is refused
with what is wrong (``ValueError``); the trace reader adds its file and line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tritonguard.core.change_text import HIDDEN, SECRETISH
from tritonguard.core.config_patch import Change
from tritonguard.core.findings import Subject
from tritonguard.core.rollout_changes import RolloutChange, hide_words
from tritonguard.core.samples import Sample, label, make_labels

if TYPE_CHECKING:
    from tritonguard.core.config_changes import ConfigChange
    from tritonguard.core.engine import Engine

CONFIG_INFO = "tritonguard_model_config_info"
ROLLOUT_INFO = "tritonguard_rollout_info"
# The info series a trace may carry besides metrics.
TRACE_INFO = frozenset({CONFIG_INFO, ROLLOUT_INFO})
# A model config is a few KB; a label far larger is not one (and JSON nesting is bounded by
# the parser's own limit on a label's length before it gets here).
MAX_CONFIG_CHARS = 256 * 1024
# A pod-template diff is a few leaves per container; more is not one the daemon wrote.
MAX_ROLLOUT_CHANGES = 256
MAX_CHANGES_CHARS = 64 * 1024


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
    text = get["changes"] or "[]"
    if len(text) > MAX_CHANGES_CHARS:
        raise ValueError(f"{where}: changes of {len(text)} characters, over {MAX_CHANGES_CHARS}")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{where}: the changes label is not JSON ({exc.msg} at column {exc.colno})"
        ) from None
    except RecursionError:
        raise ValueError(f"{where}: the changes label nests too deeply") from None
    if not isinstance(raw, list) or len(raw) > MAX_ROLLOUT_CHANGES:
        raise ValueError(
            f"{where}: changes must be a JSON list of at most {MAX_ROLLOUT_CHANGES} "
            "[path, old, new] entries"
        )
    changes: list[Change] = []
    for entry in raw:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)):
            raise ValueError(f"{where}: each change must be [path, old, new], not {entry!r:.60}")
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


def check_trace_info(sample: Sample) -> None:
    """Raise ValueError if an info sample of a trace cannot be read (what is wrong, and where)."""
    if sample.name == CONFIG_INFO:
        read_config_sample(sample)
    elif sample.name == ROLLOUT_INFO:
        read_rollout_sample(sample)


def note_trace_info(engine: Engine, sample: Sample) -> None:
    """Give the engine what an info sample records, as the daemon gives it its reads."""
    if sample.name == CONFIG_INFO:
        subject, config = read_config_sample(sample)
        engine.note_model_config(subject, config, at=sample.timestamp)
    elif sample.name == ROLLOUT_INFO:
        pod, rollout = read_rollout_sample(sample)
        engine.note_rollout(rollout.namespace, pod, rollout)


def change_samples(subject: Subject, change: ConfigChange) -> list[Sample]:
    """Return the samples that make a trace replay to ``change`` on ``subject``.

    The two config reads it lies between (when it changed the model config) and the rollout
    the pod came from: what an incident's own trace needs to name the same change again.
    """
    out: list[Sample] = []
    if change.changes:
        out.append(config_sample(subject, change.before, change.at_earliest))
        out.append(config_sample(subject, change.after, change.at_latest))
    if change.rollout is not None and subject.pod:
        out.append(rollout_sample(subject.pod, change.rollout))
    return out
