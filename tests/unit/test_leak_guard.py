"""The leak guard itself: run a small suite of leaky and clean tests in a pytest of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
from tests.conftest import (  # the guard exactly as the suite uses it
    _no_leaks,
    pytest_collection_finish,
    pytest_configure,
    pytest_fixture_setup,
)
"""
INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
filterwarnings = error::ResourceWarning
markers =
    allow_leak(kind, pattern, *, reason): accepted leak
"""
CASES = """
import asyncio, socket, subprocess, sys, threading, time
import aiohttp
import pytest

SLEEPER = [sys.executable, "-c", "import time; time.sleep(2)"]

async def test_leaks_a_task():
    async def forever():
        await asyncio.sleep(3600)
    asyncio.create_task(forever(), name="forever")

def test_leaks_a_task_through_asyncio_run():
    async def main():
        asyncio.get_running_loop().create_task(asyncio.sleep(100), name="background")
    asyncio.run(main())

def test_leaks_a_thread():
    threading.Thread(target=threading.Event().wait, name="waiter", daemon=True).start()

def test_leaks_a_process():
    proc = subprocess.Popen(SLEEPER)
    pytest.leaked = proc  # kept: the process, not an unclosed Popen, is the leak here

def test_leaks_an_orphan():
    code = f"import subprocess; subprocess.Popen({SLEEPER!r})"
    subprocess.run([sys.executable, "-c", code], check=True)

async def test_leaks_an_aiohttp_session():
    aiohttp.ClientSession()

def test_leaks_a_socket():
    socket.socket()

async def test_a_task_ending_in_the_grace_is_fine():
    asyncio.create_task(asyncio.sleep(0.05))

async def test_to_thread_is_fine():
    await asyncio.to_thread(time.sleep, 0.01)

@pytest.mark.asyncio(loop_scope="module")
async def test_to_thread_on_a_module_loop_is_pooled_not_leaked():
    await asyncio.gather(*(asyncio.to_thread(time.sleep, 0.02) for _ in range(3)))

@pytest.fixture(scope="module")
def server():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="module-server", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()

def test_a_module_fixture_owns_its_thread(server):
    pass

@pytest.mark.allow_leak("thread", "known-*", reason="product defect: a thread nobody stops")
def test_an_exempted_leak_passes():
    threading.Thread(target=threading.Event().wait, name="known-1", daemon=True).start()

@pytest.mark.allow_leak("thread", "known-*", reason="product defect: a thread nobody stops")
def test_an_exemption_covers_only_its_kind_and_name():
    threading.Thread(target=threading.Event().wait, name="other", daemon=True).start()
"""
LEAKY = {
    "test_leaks_a_task": ("forever", "still pending when its event loop shut down"),
    "test_leaks_a_task_through_asyncio_run": ("background", "created at"),
    "test_leaks_a_thread": ("waiter", "still running"),
    "test_leaks_a_process": ("time.sleep(2)", "still running after the test"),
    "test_leaks_an_orphan": ("time.sleep(2)", "orphaned"),
    "test_leaks_an_aiohttp_session": ("Unclosed client session", "ClientSession"),
    "test_leaks_a_socket": ("unclosed <socket.socket", "object: <socket.socket"),
    "test_an_exemption_covers_only_its_kind_and_name": ("other", "still running"),
}
CLEAN = {
    "test_a_task_ending_in_the_grace_is_fine",
    "test_to_thread_is_fine",
    "test_to_thread_on_a_module_loop_is_pooled_not_leaked",
    "test_a_module_fixture_owns_its_thread",
    "test_an_exempted_leak_passes",
}


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Run the cases under the guard once; map each test to its error message ('' if clean)."""
    here = tmp_path_factory.mktemp("guarded")
    (here / "conftest.py").write_text(CONFTEST)
    (here / "pytest.ini").write_text(INI)
    (here / "test_cases.py").write_text(CASES)
    report = here / "report.xml"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_LEAK_GUARD_GRACE_S": "0.3"}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=here,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    results: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        problems = [*case.iter("error"), *case.iter("failure")]
        results[case.get("name", "")] = "\n".join(
            f"{p.get('message', '')}\n{p.text or ''}" for p in problems
        )
    # The leaked sleepers end by themselves within seconds; wait, so this test leaks none.
    pids = {int(p) for text in results.values() for p in re.findall(r"pid (\d+)", text)}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.1)
    return results


@pytest.mark.parametrize("name", sorted(LEAKY))
def test_each_kind_of_leak_fails_its_test_naming_the_leak(
    outcome: dict[str, str], name: str
) -> None:
    """Tasks, threads, processes, orphans, sessions and sockets: each fails, named and placed."""
    assert name in outcome, f"{name} did not run"
    message = outcome[name]
    what, how = LEAKY[name]
    assert "thing(s) behind" in message, message
    assert what in message and how in message, message


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_what_is_pooled_owned_finished_or_exempted_passes(
    outcome: dict[str, str], name: str
) -> None:
    """A finished task, pooled workers, a module fixture's thread and an exemption: no error."""
    assert name in outcome, f"{name} did not run"
    assert outcome[name] == "", outcome[name]
