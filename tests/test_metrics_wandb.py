"""W&B logging through a real offline run (no mock): the step metric set by define_metric, one
row per evaluation at the candidate's step, networks as model artifacts with their aliases, the
Elo curve as a wandb.Table. The run is read back from the file W&B writes (`run-<id>.wandb`:
W&B's record log, protobuf records in 32 KiB blocks as in LevelDB's log format)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from checkerzero.metrics import MetricsLogger

wandb_pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")

BLOCK = 32 * 1024  # W&B's record log block size
HEADER = 7  # b":W&B", magic (2 bytes), version (1 byte); each record: crc32, length, type


def wandb_records(path: Path) -> list:
    """Every protobuf Record of an offline run's .wandb file."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a W&B record log"
    pos, pending, out = HEADER, b"", []
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if length == 0 and kind == 0:
            pos += left
            continue
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == 1:  # full
            out.append(chunk)
        elif kind == 2:  # first
            pending = chunk
        elif kind == 3:  # middle
            pending += chunk
        elif kind == 4:  # last
            out.append(pending + chunk)
    records = []
    for raw in out:
        record = wandb_pb.Record()
        record.ParseFromString(raw)
        records.append(record)
    return records


def test_offline_wandb_run_has_the_step_metric_eval_rows_models_and_table(
    tmp_path, monkeypatch
) -> None:
    for var in ("WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    run_dir = tmp_path / "run"
    log = MetricsLogger(run_dir, wandb_cfg={"mode": "offline", "project": "t"}, run_name="r1")
    assert log._wandb is not None, "W&B did not start offline"
    evaluation = {"eval/version": 3.0, "eval/elo": 150.0, "eval/step": 40.0}
    log.log({"learner/loss_total": 2.5} | evaluation, step=100)
    log.log({"learner/loss_total": 2.0} | evaluation, step=120)  # the same evaluation again
    log.log({"learner/loss_total": 1.5, "eval/version": 4.0, "eval/elo": 210.0}, step=140)
    model = tmp_path / "latest.safetensors"
    model.write_bytes(b"weights")
    assert log.log_model(model, version=4, aliases=["latest"], metadata={"step": 140})
    assert not log.log_model(model, version=4, aliases=["latest"])  # unchanged: not again
    curve = tmp_path / "curve.csv"
    curve.write_text("version,step,wall_s,positions,elo\n3,40,0.0,1000,150.0\n4,,12.5,,210.0\n")
    assert log.log_table("eval/curve", curve)
    log.close()

    (path,) = run_dir.glob("wandb/offline-run-*/run-r1.wandb")
    records = wandb_records(path)
    metrics = [r.metric for r in records if r.WhichOneof("record_type") == "metric"]
    globs = {m.glob_name: m.step_metric for m in metrics if m.glob_name}
    assert globs["eval/*"] == "learner/step" and globs["learner/*"] == "learner/step"
    assert any(m.name == "learner/step" for m in metrics)

    rows = []
    for r in records:
        if r.WhichOneof("record_type") == "history":
            rows.append({i.nested_key[0]: json.loads(i.value_json) for i in r.history.item})
    training = [row for row in rows if "learner/loss_total" in row]
    assert [row["learner/step"] for row in training] == [100, 120, 140]
    assert all("eval/elo" not in row for row in training)
    evals = [row for row in rows if "eval/elo" in row]
    # One row per evaluation, at its candidate's step (the current step when it has none).
    assert [(row["learner/step"], row["eval/elo"]) for row in evals] == [(40, 150), (140, 210)]

    artifacts = [r.artifact for r in records if r.WhichOneof("record_type") == "artifact"]
    (model_artifact,) = [a for a in artifacts if a.type == "model"]
    assert model_artifact.name == "network-r1"
    assert set(model_artifact.aliases) >= {"latest", "weights-v4"}
    assert json.loads(model_artifact.metadata) == {"version": 4, "step": 140}

    (table_file,) = run_dir.glob("wandb/offline-run-*/files/media/table/eval/curve*.table.json")
    table = json.loads(table_file.read_text())
    assert table["columns"] == ["version", "step", "wall_s", "positions", "elo"]
    assert table["data"] == [[3, 40, 0.0, 1000, 150.0], [4, None, 12.5, None, 210.0]]
