"""Point states from real run directories: nothing is dropped, every non-ok point carries its reason."""
from __future__ import annotations

import json

from conftest import queue

from hpcbench.files import atomic_write_json
from hpcbench.plan.expand import expand
from hpcbench.plan.spec import parse
from hpcbench.records import ErrorRecord
from hpcbench.report.summarize import sweep_summary
from hpcbench.rundir import RunDir
from hpcbench.states import collect

SWEEP = "[matrix]\nnodes = [1, 2]\nranks_per_node = [1, 2]\n[[exclude]]\nnodes = 1\nranks_per_node = 1\n"


def make_run(tmp_path):
    spec = parse(SWEEP + "[sweep]\nrepeats = 2\n", "s.toml")
    points = expand(spec)
    return RunDir.create(tmp_path / "run", spec.text, "s", points), points


def error(point, rank, time, msg):
    return ErrorRecord(point_id=point.id, rank=rank, hostname=f"host{rank}", error_type="RuntimeError",
                       message=msg, traceback="...", time=time).to_dict()


def test_every_point_gets_a_state_and_reason(tmp_path):
    rd, pts = make_run(tmp_path)
    assert len(pts) == 6
    a, b, c, d, e, _f = pts
    # a: two ranks failed; the earlier one is the root cause.
    rd.record("submitted", a.id, job_id="990011", backend="sbatch")
    atomic_write_json(rd.point(a).error(1), error(a, 1, "2026-01-01T00:00:05+00:00", "Connection reset by peer"))
    atomic_write_json(rd.point(a).error(0), error(a, 0, "2026-01-01T00:00:01+00:00", "CUDA out of memory"))
    # b: Slurm killed it at the time limit.
    rd.record("submitted", b.id, job_id="990012", backend="sbatch")
    rd.point(b).stderr("990012").write_text("slurmstepd: error: *** JOB 990012 ON node1 CANCELLED AT 2026-01-01T00:10:00 "
                                         "DUE TO TIME LIMIT ***\n")
    # c: the launcher failed with an exit code before Python ran.
    rd.record("submitted", c.id, job_id="990013", backend="sbatch")
    rd.point(c).exitcode.write_text("127\n")
    rd.point(c).stderr("990013").write_text("line 1\nbash: python: command not found\n")
    # d: left the queue with nothing at all.
    rd.record("submitted", d.id, job_id="990014", backend="sbatch")
    # e: a record from a future hpcbench.
    rd.record("submitted", e.id, job_id="990015", backend="sbatch")
    rd.point(e).result.write_text(json.dumps({"schema": "hpcbench.result/99"}))
    # f: never submitted.

    states = {s.point.id: s for s in collect(rd, queue({}))}
    assert [states[p.id].state for p in pts] == ["FAILED", "TIMEOUT", "FAILED", "MISSING", "UNPARSABLE", "NOT_SUBMITTED"]
    assert states[a.id].reason == "rank 0 on host0: RuntimeError: CUDA out of memory (+1 more ranks failed)"
    assert "DUE TO TIME LIMIT" in states[b.id].reason
    assert states[c.id].reason == "exit code 127: bash: python: command not found"
    assert "job 990014 left the queue without a result or exit code" in states[d.id].reason
    assert "hpcbench.result/99" in states[e.id].reason and "not known to this hpcbench" in states[e.id].reason

    # A job still queued shows its live state; with the queue unreadable, the state is unknown, not missing.
    assert {s.point.id: s.state for s in collect(rd, queue({"990014": "PENDING"}))}[d.id] == "PENDING"
    assert {s.point.id: s.state for s in collect(rd, None)}[d.id] == "UNKNOWN"

    text, rows = sweep_summary(rd, "table")
    assert len(rows) == 6 and all(r["throughput"] is None for r in rows)
    assert "CUDA out of memory" in text and "NOT_SUBMITTED" in text
    csv_lines = rd.summary_csv.read_text().splitlines()
    assert len(csv_lines) == 7 and csv_lines[0].startswith("point_id,label,backend")


def test_a_packed_point_is_final_once_its_step_wrote_its_exit_status(tmp_path):
    # The step writes result.json, then its exit status, while the shared allocation runs on.
    from report_helpers import record

    rd, pts = make_run(tmp_path)
    p = pts[0]
    rd.record("submitted", p.id, job_id="990020", backend="sbatch", pack="pack-1")
    atomic_write_json(rd.point(p).result, record(p, 100.0).to_dict())
    [st] = [s for s in collect(rd, queue({"990020": "RUNNING"})) if s.point.id == p.id]
    assert (st.state, st.ok, st.final) == ("RUNNING", True, False)
    rd.point(p).exitcode.write_text("0\n")
    [st] = [s for s in collect(rd, queue({"990020": "RUNNING"})) if s.point.id == p.id]
    assert (st.state, st.final) == ("COMPLETED", True)
    # Without a pack, the record alone makes the point final, as before.
    q = pts[1]
    rd.record("submitted", q.id, job_id="990021", backend="sbatch")
    atomic_write_json(rd.point(q).result, record(q, 100.0).to_dict())
    assert [s.state for s in collect(rd, queue({"990021": "RUNNING"})) if s.point.id == q.id] == ["COMPLETED"]
