"""The ``mlflow`` backend: one MLflow run per job, written by every role's writer process.

Importing this package never imports mlflow: the backend class lives in
:mod:`tracking_mlflow.backend`, which the registry imports only when ``mlflow`` is selected.

**Where.** ``--mlflow-tracking-uri`` (else ``$MLFLOW_TRACKING_URI``, else the embedded store
``sqlite:///<tracking_dir>/mlflow/mlflow.db`` with artifacts under
``<tracking_dir>/mlflow/artifacts``); ``--mlflow-experiment`` (else ``$MLFLOW_EXPERIMENT_NAME``, else
``$MLFLOW_EXPERIMENT_ID``, else ``tracking-core``); ``--mlflow-run-name`` (else the job's run
name); ``--mlflow-tags k=v,k2=v2`` (added to the run's tags). Credentials
(``MLFLOW_TRACKING_TOKEN``, ``MLFLOW_TRACKING_USERNAME``/``PASSWORD``) are read by MLflow itself
and never logged; a tracking URI that embeds ``user:password@`` is stored in the run handle
without them (each process then needs them from its own environment). All of this is decided
once, in the training process when the run starts, without mlflow: the backend's target
(:func:`tracking_mlflow.settings.target`: ``{tracking_uri, experiment}`` or ``{tracking_uri,
experiment_id}``), which the run handle keeps and ``open_run`` opens the run in, whatever the
environment of the process that opens it says.

**One run per job.** The primary creates the run in the target (or finds the one it created
before, by the tag ``tracking_core.run_id``) and returns ``{tracking_uri, run_id, experiment_id,
experiment}`` for the run handle. Secondaries attach by run id and never create a run; one that
has only the target (the primary's open not reported yet) finds the run by that tag in the
target's experiment, or fails with "not open yet" and is retried. Only the primary sets the
final status (FINISHED, FAILED, KILLED).

**Config.** Params are shaped by MLflow's rules (:mod:`tracking_mlflow.keys`), in batches of at
most 100; the whole namespace goes to the artifact ``config/<namespace>.json``; keys the shaping
renamed or values it cut are listed in ``config/<namespace>.mlflow-keys.json`` (and warned
about). A param logged again with the same value is skipped; a *changed* value cannot be stored
(MLflow params are immutable): the param keeps its first value, the new one is recorded in the tag
``config_changed/<key>`` and in ``config/<namespace>.changes-<time>.json``, with a warning.

**Metrics.** ``log_batch`` requests of at most 1000 metrics; keys shaped like param keys
(``passrate/pass@1`` -> ``passrate/pass_at_1--1a19f3c5``: a renamed key carries its own hash, see
:mod:`tracking_mlflow.keys`; recorded in a ``tracking_core.metric_key/...`` tag);
timestamps are the records' own (milliseconds), so a retried batch is the same data: MLflow's SQL
stores drop a metric identical to a stored one (same key, step, value and timestamp), which makes
retries and journal replays exactly-once. A record without a step is logged at step 0 (MLflow's own
default). A named step axis (``train/step``) is the step of its metrics, which MLflow's charts
plot against: it is no metric series of its own (a chart of a straight line among the losses),
and a logged value that is just the axis at its own step (slime's ``train/step``) is not logged.

**Tables, histograms, texts, artifacts** (:mod:`tracking_mlflow.media`): tables with
``MlflowClient.log_table`` (``tables/<key>/step-000012.json``, shown as tables in MLflow's UI),
histograms as ``histograms/<key>/step-000012.json`` (bins, count, every percentile) plus the
series ``<key>/mean``, ``/min``, ``/max``, ``/p5``, ``/p50``, ``/p95`` on the same step, texts with ``log_text``
(``texts/<key>/step-000012.txt``), files and directories with ``log_artifact(s)`` under
``artifacts/<name>``; each stored once however often it is offered.
"""

from __future__ import annotations

from tracking_core.plugin_api import Backend, BackendRegistrar, HostParser, hookimpl

from .views import MlflowViews


@hookimpl
def register_backends(register: BackendRegistrar) -> None:
    """Offer ``mlflow``; the class (and mlflow) is imported only when a run selects it."""
    register(
        Backend(
            "mlflow",
            "tracking_mlflow.backend:MlflowBackend",
            # Where the run goes, decided at start without mlflow (the URI without credentials).
            target="tracking_mlflow.settings:target",
            requires=["mlflow"],
            extra="mlflow",
            description="MLflow: a tracking server, or the embedded SQLite store in the tracking dir",
            # A batch fits one log_batch request (at most 1000 metrics), with room to spare.
            max_batch=900,
            # Every MLflow request costs ~6 ms of client CPU whatever its size (measured, MLflow
            # 3.17): deliver at most every 2 s, well inside the 5 s live-delivery bound.
            batch_interval=2.0,
            viewer_port=5000,  # `tracking-core ui` starts the MLflow UI on a local store
            default_rank=10,  # the embedded default where mlflow is installed (jsonl: 0)
            views=MlflowViews(),
        )
    )


@hookimpl
def add_options(parser: HostParser) -> None:
    """MLflow's options, each only where the host does not define it already."""
    parser.add_argument(
        "--mlflow-tracking-uri",
        default=None,
        help=(
            "MLflow tracking URI (http://host:5000, sqlite:///path.db, ...). Default: "
            "$MLFLOW_TRACKING_URI, else the embedded SQLite store in the tracking directory."
        ),
    )
    parser.add_argument(
        "--mlflow-experiment",
        default=None,
        help="MLflow experiment name. Default: $MLFLOW_EXPERIMENT_NAME, else 'tracking-core'.",
    )
    parser.add_argument(
        "--mlflow-run-name",
        default=None,
        help="MLflow run name (the mlflow.runName tag). Default: the job's run name.",
    )
    parser.add_argument(
        "--mlflow-tags",
        default=None,
        help="Extra MLflow run tags: comma-separated key=value pairs, or a JSON object.",
    )
