"""`tritonguard demo` where the lab's dependencies are missing (the daemon image)."""

from __future__ import annotations

import subprocess
import sys


def test_demo_without_the_lab_extra_says_what_to_install() -> None:
    """Without tritonclient (the image installs no `lab` extra), one line and exit 2, no traceback."""
    probe = (
        "import sys; sys.modules['tritonclient'] = None; "
        "from tritonguard.cli.main import main; sys.exit(main(['demo', '--quick']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "tritonguard demo: the fault lab needs 'tritonclient', which is not installed; "
        "install the lab extra: pip install 'tritonguard[lab]'"
    ]
