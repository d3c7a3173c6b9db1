"""tritonguard: explains Triton tail-latency explosions and runs guarded playbooks."""

__version__ = "0.1.0"
