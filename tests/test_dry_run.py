"""A run directory made by `hpcbench plan` (sweep --dry-run) is a dry run: its scripts are there to read, and a
summary says so in one line instead of a row of NOT_SUBMITTED per point; a sweep given its --run-dir runs it."""
from __future__ import annotations

import json
import sqlite3

from conftest import write

SWEEP = """[sweep]
name = "tiny"
[workload]
framework = "ddp"
model = "mlp"
device = "cpu"
batch_size = 16
steps = 4
warmup_steps = 1
[matrix]
backend = ["gloo"]
nodes = [1]
ranks_per_node = [1]
"""


def test_a_dry_run_is_marked_said_in_one_line_and_becomes_a_run_when_submitted(cli, tmp_path):
    sweep = write(tmp_path / "tiny.toml", SWEEP)
    runs = tmp_path / "runs"
    planned = cli("plan", str(sweep), "--runs-root", str(runs), cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    (dry,) = runs.iterdir()
    assert json.loads((dry / "plan.json").read_text())["dry_run"] is True
    assert f"hpcbench sweep {sweep} --run-dir {dry}" in planned.stdout
    assert (next((dry / "points").iterdir()) / "job.sh").is_file()  # the scripts, to read

    only = cli("summarize", str(runs), cwd=tmp_path)
    assert only.returncode == 2 and only.stdout == "", only.stdout
    (line,) = only.stderr.splitlines()
    assert line.startswith(f"error: {dry}: a dry run ('hpcbench plan'): its 1 job scripts were written, nothing was "
                           "submitted") and f"hpcbench sweep {sweep} --run-dir {dry}" in line, line

    # the planned folder submitted: a run like any other, no longer a dry run
    ran = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(dry), cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    again = cli("plan", str(sweep), "--runs-root", str(runs), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    (dry2,) = set(runs.iterdir()) - {dry}
    db = tmp_path / "h.sqlite"
    both = cli("summarize", str(runs), "--no-plots", "--format", "csv", "--history", str(db), cwd=tmp_path)
    assert both.returncode == 0, both.stderr
    rows = both.stdout.strip().splitlines()
    assert len(rows) == 2 and ",COMPLETED," in rows[1] and "NOT_SUBMITTED" not in both.stdout, both.stdout
    notes = [ln for ln in both.stderr.splitlines() if "dry run" in ln]
    said = (f"left out 1 dry run(s) ('hpcbench plan': 1 points planned, nothing submitted): {dry2}; "
            f"to run one: hpcbench sweep {sweep} --run-dir {dry2}")
    assert notes == [said], both.stderr
    assert sqlite3.connect(db).execute("SELECT state FROM records").fetchall() == [("COMPLETED",)]
