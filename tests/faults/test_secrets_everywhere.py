"""A planted token appears in no file any tracker writes, whichever field it is planted in.

One real run with jsonl, W&B (offline), TensorBoard and a real MLflow server, and one token of a
shape the redaction knows in each field a user or a host fills: the run name, a tag's key and a
tag's value, a metric name (``https://user:PASSWORD@host/x``), a table's key and a column's
name, a text's key, a histogram's key, an artifact's name, a config list pair
(``["AWS_SECRET_ACCESS_KEY", VALUE]``), and the command line W&B records (``--db-pass VALUE``
and a URL whose first query parameter is ``?token=VALUE``). Every file under the test's
directory (the tracking directory with its journal, handle and saved configs, W&B's and
TensorBoard's files) and the MLflow server's store (SQLite and artifacts) is searched for each
token: none may hold it, while the run is live (the journal is there) and after it ended. Each
field did arrive, redacted: its marker (``<redacted sha256:…>`` of the token) is found.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults.conftest import Faults
from tests.helpers.mlflow_server import MlflowServer
from tests.helpers.subprocess_python import JOBS
from tests.helpers.wandb_offline import count_files, grep_files, offline_env
from tracking_core.config import fingerprint

pytest.importorskip("mlflow")
pytest.importorskip("wandb")
pytest.importorskip("tensorboardX")

#: field -> the token planted there (each distinct, so a hit names the field that leaked).
TOKENS = {
    "run name": "hf_RunNameRunNameRunNameRunName0001",
    "tag key": "hf_TagKeyTagKeyTagKeyTagKeyTagK0002",
    "tag value": "hf_TagValueTagValueTagValueTagV0003",
    "metric name": "Metr1cPassw0rd0004",
    "table key": "hf_TableKeyTableKeyTableKeyTab0005",
    "column name": "hf_ColumnColumnColumnColumnCol0006",
    "text key": "hf_TextKeyTextKeyTextKeyTextKe0007",
    "histogram key": "hf_HistKeyHistKeyHistKeyHistKe0008",
    "artifact name": "hf_ArtifactArtifactArtifactArt0009",
    "config pair": "Cfg0010wJalrXUtnFEMI/K7MDENG/bPxRfiCY",
    "argv --db-pass": "ArgvDbPass0011",
    "argv ?token=": "ArgvQueryToken0012",
}

JOB = JOBS / "secrets_everywhere.py"


def _hits(roots: list[Path], token: str) -> list[Path]:
    return [p for root in roots for p in grep_files(root, token)]


@pytest.mark.slow
@pytest.mark.integration
def test_a_token_in_any_field_reaches_no_file(
    mlflow_server: MlflowServer, faults: Faults, tmp_path: Path, jobs
) -> None:
    import json

    td = tmp_path / "td"
    src = tmp_path / "model.bin"
    src.write_bytes(os.urandom(1000))
    env = faults.env(PLANTED=json.dumps(TOKENS), **offline_env(tmp_path))
    argv = ["--db-pass", TOKENS["argv --db-pass"], "--data-url", f"https://h/x?token={TOKENS['argv ?token=']}&n=1"]
    job = jobs(JOB, env, args=[td, mlflow_server.uri, src, *argv])
    flushed = job.readline_until("FLUSHED", timeout=240)
    # While the run is live: the journal is there, and holds none of them either.
    assert any((td / "journal").rglob("seg-*.jsonl")), "no journal segment to search"
    live = {field: _hits([tmp_path], token) for field, token in TOKENS.items()}
    job.send("go\n")
    job.wait(300)
    summary = job.result["summary"]
    assert flushed.startswith("True") and summary["drained"] is True, summary["describe"]
    store = [mlflow_server.root / "artifacts", *mlflow_server.root.glob("mlflow.db*")]
    roots = [tmp_path, *store]
    assert count_files(tmp_path) > 20 and count_files(mlflow_server.root / "artifacts") > 0
    after = {field: _hits(roots, token) for field, token in TOKENS.items()}
    assert {f: h for f, h in live.items() if h} == {}, "planted tokens in files of the live run"
    assert {f: h for f, h in after.items() if h} == {}, "planted tokens in files after finish"
    # Each field arrived, redacted (the source files of the job itself are left out).
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix not in (".py", ".stderr")]
    text = b"".join(p.read_bytes() for p in files)
    missing = [f for f, token in TOKENS.items() if fingerprint(token).encode() not in text]
    assert missing == [], f"no redacted trace of {missing}: were those fields delivered at all?"
