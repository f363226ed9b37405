"""A third-party tracker gets what the built-in ones get: the plugin template, installed by pip
as a distribution of its own (found through its entry point, not imported from the checkout),
says where its run is when the run starts and how to upload it when the run ends, gets its
viewer started by ``tracking-core ui`` (with a ``--acme-port`` option) and its read-back printed
by ``tracking-core show`` — through its hooks alone, the core naming no tracker.

The template is installed with ``pip install --target`` into a folder put on ``PYTHONPATH`` of
the processes under test, rather than into the shared virtual environment, where the other
tests running at the same time would find it among their plugins."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.subprocess_python import JOBS, python_env, run_python
from tests.helpers.template import install_template

TRAIN = JOBS / "third_party_tracker_train.py"

CLI = "import sys; from tracking_core import cli; sys.exit(cli.main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = install_template(tmp_path_factory.mktemp("acme"))
    assert not (site / "tracking_acme.py").is_symlink()
    return site


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(300)
def test_a_template_tracker_gets_start_and_end_lines_ui_and_show(site: Path, tmp_path: Path) -> None:
    job = run_python(
        TRAIN, args=["--tracking-backends", "acme", "--tracking-dir", tmp_path],
        site=site, drop=("TRACKING_CORE_*",), cwd=tmp_path,
    )  # fmt: skip
    run_id = job.stdout.strip().splitlines()[-1]
    data = tmp_path / "acme" / run_id
    err = job.stderr
    # the start line says where its data is (tracker_location) ...
    assert f"started → acme\n  acme: {data}\n" in err, err
    # ... and the end of the run how to upload it (tracker_sync), under the summary
    end = err[err.index("tracking-core: run FINISHED") :]
    assert f"\n  acme: upload it with: acme-upload {data}" in end, end

    # ui --dry-run: the viewer's command on a free port from the one the plugin declares
    ui = run_python(CLI, args=["ui", "--dry-run", "--tracking-dir", tmp_path], site=site, drop=("TRACKING_CORE_*",), cwd=tmp_path)
    (line,) = [x for x in ui.stdout.splitlines() if x.startswith("acme: ")]
    command, url = line[len("acme: ") :].split("  -> ")
    port = int(url.rsplit(":", 1)[1].strip("/"))
    assert 8765 <= port < 8865, line
    assert command == f"{sys.executable} -m http.server {port} --bind 127.0.0.1 --directory {data}"
    # --acme-port is derived from the registration
    chosen = _free_port()
    ui = run_python(
        CLI, args=["ui", "--dry-run", "--acme-port", str(chosen), "--tracking-dir", tmp_path],
        site=site, drop=("TRACKING_CORE_*",), cwd=tmp_path,
    )  # fmt: skip
    assert f"  -> http://127.0.0.1:{chosen}/" in ui.stdout, ui.stdout

    # show: the plugin's read-back, formatted by the core
    shown = run_python(CLI, args=["show", run_id, "--tracking-dir", tmp_path], site=site, drop=("TRACKING_CORE_*",), cwd=tmp_path)
    section = shown.stdout.split("[acme] ", 1)[1]
    assert section.startswith(f"{data}  FINISHED\n"), shown.stdout
    assert "    actor/train/loss = 0.333333 (step 2)\n" in section, shown.stdout


@pytest.mark.timeout(300)
def test_ui_starts_the_template_trackers_viewer_and_stops_it(site: Path, tmp_path: Path) -> None:
    job = run_python(
        TRAIN, args=["--tracking-backends", "acme", "--tracking-dir", tmp_path],
        site=site, drop=("TRACKING_CORE_*",), cwd=tmp_path,
    )  # fmt: skip
    run_id = job.stdout.strip().splitlines()[-1]
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "ui", run_id, "--acme-port", str(port), "--tracking-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path,
        env=python_env(drop=("TRACKING_CORE_*",), site=site),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(4)]
        assert lines[1].startswith(f"acme: http://127.0.0.1:{port}/  (the acme files in "), lines
        assert lines[2].startswith("the viewers' logs: ") and lines[3] == "Ctrl-C stops them.\n", lines
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
            listing = response.read().decode()
        assert "primary-" in listing and ".jsonl" in listing, listing  # the run's own files
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    assert code == 0
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0, "the viewer outlived tracking-core ui"
