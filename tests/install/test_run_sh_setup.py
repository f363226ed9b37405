"""``./run.sh``'s first set-up, into a fresh virtual environment under the test's own directory
(nothing shared with the checkout's ``.venv``): never silent for more than 30 s while it
installs, pip's own output kept in a log, no setuptools notice box on the terminal."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The longest a first run may stay silent.
MAX_GAP = 30.0


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_first_setup_is_never_silent_for_long(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKING_CORE_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(TRACKING_CORE_VENV=str(venv), PYTHON=sys._base_executable, PIP_CACHE_DIR=str(tmp_path / "pip-cache"))
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", str(ROOT / "run.sh"), "demo", "--help"], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # pip and its builds with it: one group to stop
    )  # fmt: skip
    assert proc.stdout is not None
    said: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=lambda: [*map(said.put, proc.stdout), said.put(None)], daemon=True).start()  # type: ignore[arg-type]
    lines: list[tuple[float, str]] = []
    while True:
        try:
            line = said.get(timeout=MAX_GAP + 5)  # a silence past the bound fails at once
        except queue.Empty:
            os.killpg(proc.pid, signal.SIGKILL)
            text = "\n".join(f"{t:7.1f} {line}" for t, line in lines)
            pytest.fail(f"silent for more than {MAX_GAP + 5:.0f} s after:\n{text[-5000:]}")
        if line is None:
            break
        lines.append((time.monotonic() - started, line.rstrip("\n")))
    code = proc.wait(60)
    total = time.monotonic() - started
    text = "\n".join(f"{t:7.1f} {line}" for t, line in lines)
    assert code == 0, text[-5000:]
    assert not (venv / "bin" / "python").resolve().is_relative_to(ROOT / ".venv"), "the checkout's venv was used"
    steps = [line for _, line in lines if line.startswith("==> ")]
    assert steps == [
        f"==> creating {venv}",
        f"==> installing tracking-core and its extras into {venv} (first run: a few minutes; "
        f"pip's whole output: {venv}/pip-install.log)",
        "==> pip itself", "==> torch 2.13.0", "==> tracking-core with its extras",
    ], text  # fmt: skip
    times = [0.0] + [t for t, _ in lines] + [total]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(gaps) <= MAX_GAP, f"silent for {max(gaps):.0f} s:\n{text}"
    # pip's lines (progress, build output, setuptools' notices) are in its log, not here
    assert not any("Editable installation" in line or line.startswith(("****", "!!")) for _, line in lines), text
    assert "usage: tracking-core demo" in text
    log = (venv / "pip-install.log").read_text()
    assert "Successfully installed" in log and "torch" in log
