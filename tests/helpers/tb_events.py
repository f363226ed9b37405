"""Read TensorBoard event files back with TensorBoard's own reader.

Tests must check what TensorBoard will show, not what the writer meant to write, so this helper
uses TensorBoard's plugin event accumulator (the legacy ``event_accumulator`` drops hparams) with
every tensor kept (``size_guidance`` tensors=0), and the hparams plugin's own metadata parsing.
:func:`hparams_dashboard` goes one step further and asks the HParams dashboard's backend which
hyperparameter columns and metrics it would offer for a log directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENTS_MARKER = ".tfevents."


@dataclass
class TBRun:
    """What one TensorBoard run (one subdirectory of the log dir) holds.

    ``scalars`` maps a tag to its ``(step, value)`` points in file order (values are float32 on
    disk, returned as Python floats); ``text`` maps a tag to its strings; ``hparams`` is the
    run's HParams session start info (name → number, string or bool); ``session_status`` the
    HParams session end status (``STATUS_SUCCESS`` ...) or None when none was written.
    """

    scalars: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    text: dict[str, list[str]] = field(default_factory=dict)
    hparams: dict[str, Any] = field(default_factory=dict)
    session_status: str | None = None


def run_dirs(logdir: str | os.PathLike[str]) -> list[str]:
    """Subdirectories of ``logdir`` (relative, ``"."`` for itself) that hold event files."""
    root = Path(logdir)
    out = []
    for dirpath, _dirs, files in os.walk(root):
        if any(EVENTS_MARKER in name for name in files):
            out.append(os.path.relpath(dirpath, root))
    return sorted(out)


def _plugin_content(acc: Any, plugin: str) -> dict[str, bytes]:
    # PluginTagToContent raises KeyError for a plugin that never wrote to this run.
    try:
        return dict(acc.PluginTagToContent(plugin))
    except KeyError:
        return {}


def _proto_value(value: Any) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        return value.number_value
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def read_run(path: str | os.PathLike[str]) -> TBRun:
    """Read one run directory (all event files in it) with the plugin event accumulator."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import api_pb2
    from tensorboard.plugins.hparams import metadata as hp_metadata
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(path), size_guidance={"tensors": 0})
    acc.Reload()
    run = TBRun()
    for tag in sorted(_plugin_content(acc, "scalars")):
        run.scalars[tag] = [
            (int(e.step), float(tensor_util.make_ndarray(e.tensor_proto).item()))
            for e in acc.Tensors(tag)
        ]
    for tag in sorted(_plugin_content(acc, "text")):
        texts = []
        for e in acc.Tensors(tag):
            arr = tensor_util.make_ndarray(e.tensor_proto)
            parts = [b.decode("utf-8") if isinstance(b, bytes) else str(b) for b in arr.flat]
            texts.append("\n".join(parts))
        run.text[tag] = texts
    hp = _plugin_content(acc, hp_metadata.PLUGIN_NAME)
    if hp_metadata.SESSION_START_INFO_TAG in hp:
        start = hp_metadata.parse_session_start_info_plugin_data(
            hp[hp_metadata.SESSION_START_INFO_TAG]
        )
        run.hparams = {name: _proto_value(v) for name, v in start.hparams.items()}
    if hp_metadata.SESSION_END_INFO_TAG in hp:
        end = hp_metadata.parse_session_end_info_plugin_data(hp[hp_metadata.SESSION_END_INFO_TAG])
        run.session_status = api_pb2.Status.Name(end.status)
    return run


def read_logdir(logdir: str | os.PathLike[str]) -> dict[str, TBRun]:
    """Every run under ``logdir``, keyed by its subdirectory (``"actor"``, ``"."`` for the root)."""
    return {rel: read_run(Path(logdir) / rel) for rel in run_dirs(logdir)}


#: How many hyperparameter columns the HParams dashboard shows before the user ticks more (its
#: ``_computeHParams``: ``Math.min(5, hparams.length)``, TensorBoard 2.x).
DISPLAYED_COLUMNS = 5


@dataclass
class HParamsView:
    """What the HParams dashboard offers: hyperparameter columns (sorted by name), metric
    columns (``(tag, group)`` pairs; group is the sub-run relative to the session, ``""`` for the
    session's own run), and whether an explicit experiment summary decided them.

    ``columns`` is the hyperparameter columns in the dashboard's order (the order the backend
    sends, then its frontend's stable sort of the columns whose values differ first), ``differ``
    those whose values differ between sessions, and ``displayed`` the ones shown when the
    dashboard opens (the first :data:`DISPLAYED_COLUMNS`)."""

    hparams: list[str]
    metrics: list[tuple[str, str]]
    from_experiment_tag: bool
    columns: list[str] = field(default_factory=list)
    differ: list[str] = field(default_factory=list)

    @property
    def displayed(self) -> list[str]:
        return self.columns[:DISPLAYED_COLUMNS]


def hparams_dashboard(logdir: str | os.PathLike[str]) -> HParamsView:
    """Ask the HParams plugin's backend how it would present ``logdir``.

    This is the code path of the dashboard's ``experiment`` request: with no experiment summary
    anywhere it builds the columns from every run's session start info and the scalar tags of
    session runs; with one (``add_hparams`` writes one per call) that summary alone wins.
    """
    from tensorboard import context as tb_context
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import backend_context
    from tensorboard.plugins.hparams import metadata as hp_metadata

    mux = pem.EventMultiplexer(tensor_size_guidance={}, purge_orphaned_data=True)
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(logdir))
    context = backend_context.Context(
        base_plugin.TBContext(data_provider=provider, logdir=str(logdir), multiplexer=mux)
    )
    ctx = tb_context.RequestContext()
    content = context.hparams_metadata(ctx, "")
    explicit = any(hp_metadata.EXPERIMENT_TAG in tags for tags in content.values())
    experiment = context.experiment_from_metadata(
        ctx,
        "",
        include_metrics=True,
        hparams_run_to_tag_to_content=content,
        data_provider_hparams=context.hparams_from_data_provider(ctx, "", limit=None),
        hparams_limit=1000,  # what the dashboard asks for (its _maxNumHparamsToLoad)
    )
    infos = list(experiment.hparam_infos)
    # The dashboard's own step (stable): the columns whose values differ first.
    ordered = sorted(infos, key=lambda info: not info.differs)
    return HParamsView(
        hparams=sorted(info.name for info in infos),
        metrics=sorted((m.name.tag, m.name.group) for m in experiment.metric_infos),
        from_experiment_tag=explicit,
        columns=[info.name for info in ordered],
        differ=[info.name for info in ordered if info.differs],
    )
