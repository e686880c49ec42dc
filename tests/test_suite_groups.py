"""The suite's worker groups hold: under ``-n 2 --dist loadgroup`` a module that shares a
module-scoped fixture runs on one worker (its fixture, often a whole generate or eval run, is built
once), and a ``SERIAL_GROUPS`` marker's tests (the one engine, Ray, AIPerf) keep to one worker.

pytest-xdist puts a test in its group by renaming the test's node id on the worker; a pytest
release that changes where the id lives (9.2 did) silently turns every group off, so this runs the
real conftest's hook under the real xdist on a small suite and reads which worker ran each test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

TMP_CONFTEST = f"""
import importlib.util, sys
_spec = importlib.util.spec_from_file_location("agentload_suite_conftest", {str(CONFTEST)!r})
_suite = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _suite
_spec.loader.exec_module(_suite)
pytest_collection_modifyitems = _suite.pytest_collection_modifyitems  # its tryfirst mark comes with it

def pytest_configure(config):
    for name in _suite.SERIAL_GROUPS:
        config.addinivalue_line("markers", name + ": a serial group")
"""

RECORDER = """
import os, pathlib
import pytest

def _ran(name):
    out = pathlib.Path(os.environ["GROUPS_OUT"]) / (__name__ + "." + name)
    out.write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))
"""

SHARED = (
    RECORDER
    + """
@pytest.fixture(scope="module")
def built():
    return 1
"""
    + "".join(f"\ndef test_shared_{i}(built):\n    _ran('{i}')\n" for i in range(8))
)

SERIAL = RECORDER + "".join(
    f"\n@pytest.mark.engine\ndef test_serial_{i}():\n    _ran('{i}')\n" for i in range(8)
)

FREE = RECORDER + "".join(f"\ndef test_free_{i}():\n    _ran('{i}')\n" for i in range(16))


def test_a_shared_module_and_a_serial_group_each_run_on_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    out = tmp_path / "ran"
    suite.mkdir()
    out.mkdir()
    (suite / "conftest.py").write_text(TMP_CONFTEST)
    (suite / "test_shared.py").write_text(SHARED)
    (suite / "test_serial.py").write_text(SERIAL)
    (suite / "test_free.py").write_text(FREE)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(suite),
         "-c", "/dev/null", "-n", "2", "--dist", "loadgroup", "--import-mode=importlib", str(suite)],
        cwd=suite, env={**_env(), "GROUPS_OUT": str(out)}, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    workers: dict[str, set[str]] = {}
    for f in out.iterdir():
        workers.setdefault(f.name.split(".", 1)[0], set()).add(f.read_text())
    assert sorted(workers) == ["test_free", "test_serial", "test_shared"], json.dumps(
        {k: sorted(v) for k, v in workers.items()}
    )
    assert workers["test_free"] <= {"gw0", "gw1"}
    assert len(workers["test_shared"]) == 1, (
        f"a shared module ran on {sorted(workers['test_shared'])}"
    )
    assert len(workers["test_serial"]) == 1, (
        f"a serial group ran on {sorted(workers['test_serial'])}"
    )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env
