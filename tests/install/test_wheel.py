"""tracking-core as a user installs it into an environment of their own: the wheel built from the
checkout by the README's command, installed (not editable) with extras by pip into a fresh virtual
environment (no system site-packages; pip resolves the dependencies from the package index), then
used from a directory outside the checkout: ``tracking-core plugins``, a two-role job logged to a
real MLflow server, and ``tracking-core demo``.

One environment serves the whole module; building and filling it takes a few minutes (torch, the
same CPU build as the test environment's, goes in first as the README says, so the ``demo``
extra's megatron-core does not pull another one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.subprocess_python import JOBS

ROOT = Path(__file__).resolve().parents[2]
#: The source folders whose packages the wheel carries (plugins/* land at the top level).
SOURCES = ("tracking_core", "slime_integration", "verl_integration", "plugins")
#: Not part of any distribution: caches and build output the copy of the checkout leaves out.
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".pytest_cache",
    ".ruff_cache", ".mypy_cache", ".hypothesis", "tracking-runs", "mlruns", "wandb",
)  # fmt: skip
#: The extras the environment gets: a tracker, and what the demo needs.
EXTRAS = "mlflow,demo"
#: Seconds for one pip install into the fresh environment (mlflow's tree is large).
PIP_TIMEOUT = 900

pytestmark = [pytest.mark.slow, pytest.mark.timeout(PIP_TIMEOUT * 2 + 600)]


@dataclass(frozen=True)
class Venv:
    root: Path
    outside: Path  # a directory outside the checkout to run things from

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a shell with this venv activated, nothing of the test run's own
        (no PYTHONPATH, no tracking-core or MLflow variables)."""
        keep = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
            and not k.startswith(("TRACKING_CORE_", "MLFLOW_", "WANDB_", "TENSORBOARD_"))
        }
        keep["VIRTUAL_ENV"] = str(self.root)
        keep["PATH"] = os.pathsep.join([str(self.bin), keep.get("PATH", "")])
        keep.update(extra)
        return keep

    def run(self, *argv: str | Path, cwd: Path | None = None, timeout: float = 300,
            **env: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
        proc = subprocess.run(
            [str(a) for a in argv], cwd=cwd or self.outside, env=self.env(**env),
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        assert proc.returncode == 0, (
            f"{argv} exited {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}"
            f"\n--- stderr\n{proc.stderr[-12000:]}"
        )
        return proc


def _pip(python: Path | str, *args: str, cwd: Path, timeout: float = PIP_TIMEOUT) -> None:
    proc = subprocess.run(
        [str(python), "-m", "pip", *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert proc.returncode == 0, f"pip {' '.join(args)}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built by the README's command from a copy of the checkout (building writes
    build/ and *.egg-info into the source tree: not the checkout's)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "tracking-core"
    shutil.copytree(ROOT, source, ignore=SKIP)
    _pip(sys.executable, "wheel", "--no-deps", "-w", "dist", str(source), cwd=work, timeout=600)
    (built,) = (work / "dist").glob("tracking_core-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    work = tmp_path_factory.mktemp("user")
    root = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    # torch first (the README's order), the very build this test environment runs on: the CPU one
    _pip(root / "bin" / "python", "install", "--no-compile", f"torch=={version('torch')}", cwd=work)
    _pip(root / "bin" / "python", "install", "--no-compile", f"{wheel}[{EXTRAS}]", cwd=work)
    outside = work / "job"
    outside.mkdir()
    yield Venv(root, outside)


def _source_files() -> set[str]:
    """Every file of the packages in the checkout, as its path inside the wheel."""
    names: set[str] = set()
    for top in SOURCES:
        for path in (ROOT / top).rglob("*"):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            rel = path.relative_to(ROOT)
            names.add(str(rel.relative_to("plugins") if top == "plugins" else rel))
    return names


def test_wheel_holds_every_package_data_file_and_entry_point(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_text = zf.read(entry_points).decode()
    missing = sorted(_source_files() - names)
    assert not missing, f"files of the checkout's packages missing from {wheel.name}: {missing}"
    # The demo's own data travels with it: its roles file, nothing read from tests/.
    assert "slime_integration/demo/roles.yaml" in names
    assert "tracking_core/integrations/_bootstrap/sitecustomize.py" in names
    assert not [n for n in names if n.startswith("tests/")]

    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for name, target in project["scripts"].items():
        assert f"{name} = {target}" in entry_text
    groups = project["entry-points"]
    entry_points = [*groups["tracking_core"].items(), *groups["tracking_core.hosts"].items()]
    for name, target in entry_points:
        assert f"{name} = {target}" in entry_text
    # every built-in plugin's and host adapter's module is in the wheel (a package or a module)
    for _, target in entry_points:
        path = target.replace(".", "/")
        assert f"{path}/__init__.py" in names or f"{path}.py" in names, target


def test_installed_from_the_wheel_not_the_checkout(venv: Venv) -> None:
    probe = venv.outside / "probe.py"
    shutil.copyfile(JOBS / "wheel_installed_probe.py", probe)
    found = json.loads(venv.run(venv.python, probe).stdout)
    site = venv.root / "lib"
    for name, path in {**found["files"], "bootstrap": found["bootstrap"], "roles": found["roles"]}.items():
        assert Path(path).is_relative_to(site) and "site-packages" in path, (name, path)
        assert not Path(path).is_relative_to(ROOT), (name, path)
    assert found["bootstrap_exists"] and found["roles_exists"]
    assert len(found["files"]) >= 5 + 8  # the built-in plugins are entry points of the wheel
    # installed from the wheel file, not as an editable link to a source tree
    assert "archive_info" in found["direct_url"], found["direct_url"]
    assert not found["direct_url"].get("dir_info", {}).get("editable")
    assert found["prefix"] == str(venv.root) != found["base_prefix"]


def test_plugins_command_lists_the_built_in_plugins(venv: Venv) -> None:
    out = venv.run(venv.bin / "tracking-core", "plugins").stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line and not line[0].isspace()}
    for name in ("jsonl", "mlflow", "console", "environment"):
        assert rows[name][2] == "ok", out
        assert rows[name][3:] == ["tracking-core", version("tracking-core")], out
    # trackers whose libraries this environment lacks are listed, not fatal
    assert rows["wandb"][2] == "MISSING", out


#: The job, a file of its own (run from a copy outside the checkout).
JOB = JOBS / "wheel_two_roles.py"


def test_two_role_job_to_an_mlflow_server(venv: Venv, mlflow_server: MlflowServer) -> None:
    from mlflow.tracking import MlflowClient

    script = venv.outside / "train.py"
    shutil.copyfile(JOB, script)
    out = venv.run(venv.python, script, MLFLOW_TRACKING_URI=mlflow_server.uri).stdout
    run_id = out.strip().splitlines()[-1]

    data = MlflowClient(mlflow_server.uri).get_run(run_id)
    assert data.info.run_name == "two-roles" and data.info.status == "FINISHED"
    params = data.data.params
    assert params["actor/lr"] == "0.003" and params["critic/lr"] == "0.01"
    assert params["seed"] == "7"
    client = MlflowClient(mlflow_server.uri)
    for role in ("actor", "critic"):
        history = client.get_metric_history(run_id, f"{role}/train/loss")
        assert [(m.step, round(m.value, 3)) for m in history] == [(0, 1.0), (1, 0.5), (2, 0.333)]


def test_demo_runs_from_the_installed_package(venv: Venv) -> None:
    from mlflow.tracking import MlflowClient

    work = venv.outside / "demo"
    work.mkdir()
    proc = venv.run(venv.bin / "tracking-core", "demo", "--steps", "2", cwd=work, timeout=400)
    assert "FINISHED" in proc.stdout + proc.stderr
    store = work / "tracking-runs" / "mlflow" / "mlflow.db"
    client = MlflowClient(f"sqlite:///{store}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    metrics = runs[0].data.metrics
    assert "actor/train/pg_loss" in metrics and "critic/train/value_loss" in metrics
