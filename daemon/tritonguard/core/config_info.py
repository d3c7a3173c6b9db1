"""Model-config reads inside a trace: an info series, so replay and playbook tests see changes.

The daemon reads configs from Triton's repository API; a trace has no API to ask. A trace
records each read as one sample of the info series ``tritonguard_model_config_info`` whose
``config`` label holds the config as compact JSON, beside ``namespace``, ``pod`` and
``model``, at the time of the read. Replaying the trace feeds each read to the engine as the
daemon would, so an incident after a config change names it there too. The series is the
trace's own: a Triton never exposes it, and the engine never stores it as a metric.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tritonguard.core.findings import Subject
from tritonguard.core.samples import Sample, label, make_labels

CONFIG_INFO = "tritonguard_model_config_info"
# A model config is a few KB; a label far larger is not one (and JSON nesting is bounded by
# the parser's own limit on a label's length before it gets here).
MAX_CONFIG_CHARS = 256 * 1024


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
