"""Install lab models whose load can be made to hang (``tests/stalling_model.py``) in a repository."""

from __future__ import annotations

import shutil
from pathlib import Path

from tritonguard.lab.repository import ModelSpec, write_model

STALLING_MODEL = Path(__file__).with_name("stalling_model.py")


def install(repository: Path, spec: ModelSpec, stall_file: Path) -> Path:
    """Write ``spec`` with the stalling model; its loads hang while ``stall_file`` exists.

    The file is named in the config's ``stall_file`` parameter, so every config the daemon
    loads (the changed one, the previous one put back) carries it: creating the file makes
    the next load hang, removing it lets the load finish.
    """
    model_dir = write_model(repository, spec)
    shutil.copyfile(STALLING_MODEL, model_dir / str(spec.version) / "model.py")
    config = spec.render_config() + (
        f'parameters {{ key: "stall_file" value: {{ string_value: "{stall_file}" }} }}\n'
    )
    (model_dir / "config.pbtxt").write_text(config)
    return model_dir


def load_started(stall_file: Path) -> bool:
    """Return whether a load of the model has entered its hanging initialize()."""
    return any(stall_file.parent.glob(f"{stall_file.name}.started-*"))
