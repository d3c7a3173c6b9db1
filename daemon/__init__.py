"""tritonguard: diagnoses Triton Inference Server tail-latency explosions and runs guarded playbooks."""

__version__ = "0.1.0"
