"""Record kinds in one registry (tracking_core.delivery.kinds) and the journal's typed entries
(tracking_core.delivery.entries): journals keep their bytes, every kind names a real hook, and
the core dispatches on no kind by its name outside the registry and the encoding."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "tracking_core"

#: Lines as the pump and a follower write them (one of each kind), byte for byte.
LINES = [
    '{"n":0,"t":"row","ts":1.0,"m":{"a":1.0,"b":"nan","d":2.5},"st":3,"sk":"train/step"}',
    '{"n":1,"t":"row","ts":1.0,"m":{"a":1.0},"st":null,"sk":null}',
    '{"n":2,"t":"table","ts":1.0,"k":"tab","cols":["p","r","n","f"],"rows":[["hi",0.5,null,"inf"]],"st":3,"sk":null}',
    '{"n":3,"t":"hist","ts":1.0,"k":"h","h":{"c":[2,1],"e":[0.0,0.5,1.0],"count":3,"min":0.0,"max":1.0,"sum":1.5,'
    '"sq":"inf","pct":{"p5":0.05,"p25":0.25,"p50":0.5,"p75":0.75,"p95":0.95},"nf":1},"st":4,"sk":"s"}',
    '{"n":4,"t":"text","ts":1.0,"k":"t","x":"hello","st":7,"sk":null}',
    '{"n":5,"t":"config","section":{"role":"actor","namespace":"args","prefix":"","values":{"lr":0.001},'
    '"params":{"lr":0.001},"report":{}}}',
    '{"n":6,"t":"artifact","ts":1234.5,"k":"art.bin","kind":"model","src":"/tmp/art.bin","dir":false,"size":100,'
    '"files":[["art.bin",100]],"path":"/tmp/j/artifacts/n0000000006/art.bin","snap":true}',
    '{"n":7,"t":"end","status":"FINISHED","ts":1234.5}',
    '{"n":99,"t":"end","status":"KILLED","ts":1234.5,"by":"follower"}',
]


@pytest.mark.parametrize("line", LINES, ids=lambda line: json.loads(line)["t"] + "-" + str(json.loads(line)["n"]))
def test_journal_line_decodes_and_encodes_to_the_same_bytes(line: str) -> None:
    from tracking_core.delivery.entries import Damaged, Unknown, decode
    from tracking_core.delivery.journal import dumps

    entry = decode(json.loads(line))
    assert not isinstance(entry, (Damaged, Unknown)), entry
    assert dumps(entry.encode()) == line


def test_older_lines_read_with_their_defaults() -> None:
    from tracking_core.delivery.entries import Artifact, End, Histogram, decode

    art = decode({"n": 1, "t": "artifact", "ts": 1, "k": "x", "src": "/a", "path": "/a"})
    assert isinstance(art, Artifact) and art.snapshot and art.artifact_kind == "artifact" and art.files == ()
    hist = decode({"n": 2, "t": "hist", "ts": 1, "k": "h", "h": {"c": [1], "e": [0, 1], "count": 1, "min": 0, "max": 0, "sum": 0, "sq": 0, "pct": {}}})
    assert isinstance(hist, Histogram) and hist.non_finite == 0
    end = decode({"n": 3, "t": "end"})
    assert isinstance(end, End) and end.status is None and end.timestamp is None


def test_unknown_and_damaged_lines_never_raise() -> None:
    from tracking_core.delivery import kinds
    from tracking_core.delivery.entries import Damaged, Unknown, decode

    later = decode({"n": 1, "t": "video", "k": "clip"})
    assert isinstance(later, Unknown) and kinds.of(later).hook is None and kinds.count([later]) == 0
    for line in ({"n": 2, "t": "table", "ts": 1.0}, {"n": 3, "t": "row", "ts": "x", "m": {}}, {"n": 4, "t": "config"}):
        damaged = decode(line)
        assert isinstance(damaged, Damaged) and damaged.tag == line["t"]
        with pytest.raises((KeyError, TypeError, ValueError)):
            kinds.of(damaged).records(damaged, "", None)  # delivered as a refusal, counted once
        assert kinds.count([damaged]) == 1


def test_every_kind_names_real_hooks_and_counts_as_the_summary_does() -> None:
    from tracking_core.delivery import kinds
    from tracking_core.delivery.entries import TAGS, decode
    from tracking_core.plugins import get_plugin_manager

    hooks = {name for name in dir(get_plugin_manager().pm.hook) if not name.startswith("_")}
    assert set(TAGS) == {kind.entry for kind in kinds.KINDS}
    assert len({kind.name for kind in kinds.KINDS}) == len(kinds.KINDS)
    for kind in kinds.KINDS:
        assert kind.hook in hooks, kind.name
        assert all(f.hook in hooks for f in kind.fallbacks), kind.name
        assert not kind.fallbacks or kind.optional, kind.name
    counted = {json.loads(line)["n"]: kinds.count([decode(json.loads(line))]) for line in LINES}
    # each metric value, each rich record; config sections and the end are not values
    assert counted == {0: 3, 1: 1, 2: 1, 3: 1, 4: 1, 5: 0, 6: 1, 7: 0, 99: 0}


KIND_NAMES = {"row", "metric", "table", "hist", "histogram", "text", "artifact", "config", "end"}
#: The registry and the on-disk encoding: the only places that know kinds by name.
REGISTRY = {"delivery/kinds.py", "delivery/entries.py"}


def _kind_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in KIND_NAMES


def test_the_core_dispatches_on_no_record_kind_by_name() -> None:
    """A new kind is a Kind in the registry (and each tracker's handler): no comparison with a
    kind's name, no map keyed by kind names, no item tagged by one and no look at an entry's
    tag (``entry["t"]``) anywhere else in the core."""
    sites = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in REGISTRY:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(_kind_name(x) for x in (node.left, *node.comparators)):
                sites.append(f"{rel}:{node.lineno} compares with a kind's name")
            elif isinstance(node, ast.Dict) and sum(k is not None and _kind_name(k) for k in node.keys) >= 2:
                sites.append(f"{rel}:{node.lineno} maps kind names")
            elif isinstance(node, ast.Tuple) and len(node.elts) > 1 and _kind_name(node.elts[0]):
                sites.append(f"{rel}:{node.lineno} tags an item with a kind's name")
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "t":
                sites.append(f"{rel}:{node.lineno} reads an entry's tag")
    assert not sites, "\n".join(sites)


def test_metric_records_are_the_dataclass_records() -> None:
    """The worker builds metric records through their slots (see kinds.new_metric): the very
    records the dataclass makes, equal, hashed and frozen alike."""
    import dataclasses

    from tracking_core.delivery import kinds
    from tracking_core.delivery.entries import decode
    from tracking_core.records import MetricRecord

    args = ("train/loss", 0.25, 3, 1.5, 7, "actor", "actor/", "train/step")
    fast, made = kinds.new_metric(*args), MetricRecord(*args)
    assert fast == made and hash(fast) == hash(made) and repr(fast) == repr(made)
    assert dataclasses.astuple(fast) == args and fast.name == "actor/train/loss" and fast.axis == "actor/train/step"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.value = 1.0  # type: ignore[misc]
    row = decode(json.loads(LINES[1]))
    assert kinds.metric_records(row, "actor/", "actor") == [  # type: ignore[arg-type]
        MetricRecord("a", 1.0, None, 1.0, 1 << 20, "actor", "actor/", None)
    ]
