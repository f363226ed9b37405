"""What the MLflow backend decides before it talks to MLflow: where, which experiment, which tags,
how long a dead server may hold a call. Standard library only, so it is cheap to test.

:func:`target` is the backend's declared target: computed once in the training process when the
run starts (from the options and the environment *there*), saved in the run handle, and handed
back to ``open_run``, so the run is opened in the job's store even from a process whose
environment names another (``tracking-core sync`` from a shell without ``MLFLOW_TRACKING_URI``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tracking_core.plugin_api import RunContext

log = logging.getLogger("tracking_core.mlflow")

DEFAULT_EXPERIMENT = "tracking-core"
EMBEDDED_DIR = "mlflow"
EMBEDDED_DB = "mlflow.db"
ARTIFACTS_DIR = "artifacts"

#: MLflow's HTTP client defaults retry a dead server for ~4 minutes per call (7 retries, backoff
#: factor 2, 120 s timeout). The backend's worker retries failed calls itself, with its own
#: backoff and circuit breaker, so one call should fail fast: a refused connection within ~1 s,
#: a hung server within ~21 s (two tries of 10 s). ``set_terminated`` would also print the run's
#: URL to stdout: the backend logs it instead. Set before mlflow is imported, only where the user
#: has not set them: an explicit environment variable always wins.
MLFLOW_ENV_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}


def apply_env_defaults(env: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, str]:
    """Put :data:`MLFLOW_ENV_DEFAULTS` into ``env`` where unset; returns what was set.

    MLflow reads these per request, process-wide; there is no per-client setting.
    """
    applied = {}
    for name, value in MLFLOW_ENV_DEFAULTS.items():
        if not env.get(name):
            env[name] = value
            applied[name] = value
    return applied


def embedded_uri(tracking_dir: str | os.PathLike[str]) -> str:
    """The embedded store: ``sqlite:///<tracking_dir>/mlflow/mlflow.db`` (absolute path)."""
    path = Path(tracking_dir).absolute() / EMBEDDED_DIR / EMBEDDED_DB
    return f"sqlite:///{path}"


def embedded_artifacts(tracking_dir: str | os.PathLike[str]) -> str:
    """Where experiments created in a local store keep artifacts: beside the embedded store."""
    return str(Path(tracking_dir).absolute() / EMBEDDED_DIR / ARTIFACTS_DIR)


def tracking_uri(run: RunContext) -> str:
    """``--mlflow-tracking-uri``, else ``$MLFLOW_TRACKING_URI``, else the embedded store.

    A relative ``sqlite:///`` path is made absolute: every process of the job must reach the same
    file whatever its working directory.
    """
    uri = run.option("mlflow_tracking_uri", "MLFLOW_TRACKING_URI")
    if not uri:
        return embedded_uri(run.tracking_dir)
    return absolute_sqlite_uri(str(uri))


def absolute_sqlite_uri(uri: str) -> str:
    """``uri`` with a relative SQLite path made absolute (anything else unchanged)."""
    path = sqlite_path(uri)
    if path is None or path.is_absolute():
        return uri
    query = uri.partition("?")[2]
    return f"sqlite:///{path.absolute()}" + (f"?{query}" if query else "")


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, or None (a server, another database, memory)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///") :].partition("?")[0]
    if not path or path == ":memory:":
        return None
    return Path(path)


def is_local_database(uri: str) -> bool:
    """Whether ``uri`` is a database file on this host (whose artifacts we place ourselves)."""
    return sqlite_path(uri) is not None


#: The tab of MLflow's run page that holds the run's metric charts (the UI's own route names:
#: ``overview``, ``model-metrics``, ``system-metrics``). A link to the experiment instead opens
#: MLflow 3's GenAI view for many experiments; a link to the run alone opens its overview.
RUN_CHARTS_TAB = "model-metrics"


def run_page(base: str, experiment_id: Any, run_id: Any) -> str:
    """The MLflow UI at ``base``: on the run's metric charts when both ids are known, else its
    experiment list."""
    url = base.rstrip("/") + "/"
    if experiment_id and run_id:
        url += f"#/experiments/{experiment_id}/runs/{run_id}/{RUN_CHARTS_TAB}"
    return url


def run_url(uri: str, experiment_id: str | None, run_id: str | None) -> str | None:
    """The run's charts in the MLflow UI, for a server URI (None for a local store)."""
    if not uri.startswith(("http://", "https://")) or not experiment_id or not run_id:
        return None
    return run_page(public_uri(uri), experiment_id, run_id)


def public_uri(uri: str) -> str:
    """``uri`` without ``user:password@``: what may be saved in the run handle and logged."""
    parts = urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def attach_uri(run: RunContext, handle_uri: str) -> str:
    """The URI a secondary uses for the handle's ``handle_uri``: its own configured URI when that
    is the same store with credentials (which the handle never carries), else the handle's."""
    local = run.option("mlflow_tracking_uri", "MLFLOW_TRACKING_URI")
    if local and str(local) != handle_uri and public_uri(str(local)) == handle_uri:
        return str(local)
    return handle_uri


def experiment(run: RunContext) -> tuple[str | None, str | None]:
    """(name, id) of the experiment: ``--mlflow-experiment``, ``$MLFLOW_EXPERIMENT_NAME``,
    ``$MLFLOW_EXPERIMENT_ID``, else the name ``tracking-core``. Exactly one of the two is set."""
    name = run.option("mlflow_experiment", "MLFLOW_EXPERIMENT_NAME")
    if name:
        return str(name), None
    experiment_id = os.environ.get("MLFLOW_EXPERIMENT_ID")
    if experiment_id:
        return None, experiment_id
    return DEFAULT_EXPERIMENT, None


def target(run: RunContext) -> dict[str, str]:
    """Where the job's MLflow run goes, without connecting: ``{"tracking_uri", "experiment"}``,
    or ``{"tracking_uri", "experiment_id"}`` when only ``$MLFLOW_EXPERIMENT_ID`` names the
    experiment. The URI is in its public form (never ``user:password@``)."""
    name, experiment_id = experiment(run)
    out = {"tracking_uri": public_uri(tracking_uri(run))}
    if name is not None:
        out["experiment"] = name
    else:
        assert experiment_id is not None
        out["experiment_id"] = str(experiment_id)
    return out


def target_experiment(where: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(name, id) of the experiment a target or a handle entry names, exactly one of them set:
    the id when it has one (exact: what the primary opened, or ``$MLFLOW_EXPERIMENT_ID``), else
    the name, else the default name."""
    experiment_id = where.get("experiment_id")
    if experiment_id not in (None, ""):
        return None, str(experiment_id)
    name = where.get("experiment")
    return (str(name) if name else DEFAULT_EXPERIMENT), None


def parse_tags(value: Any) -> dict[str, str]:
    """``--mlflow-tags``: a mapping, a JSON object, or ``k=v,k2=v2``; values become strings."""
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    text = str(value).strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--mlflow-tags is not a valid JSON object: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError("--mlflow-tags JSON must be an object of key: value")
        return {str(k): str(v) for k, v in data.items()}
    tags: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(
                f"--mlflow-tags item {item!r} is not key=value (use k=v,k2=v2 or a JSON object)"
            )
        tags[key.strip()] = val.strip()
    return tags


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` between processes of this host (a no-op where the
    platform or the directory does not allow it: the lock is a safeguard, not a requirement)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        log.debug("no lock file %s (%s); going on without it", path, exc)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
