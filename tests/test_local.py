"""The local backend: the embedded default, real torch DDP over Gloo on this machine, no scheduler."""
from __future__ import annotations

import csv
import json
import os
import sys

import pytest
from conftest import REPO, write

from hpcbench.rundir import RunDir

pytestmark = pytest.mark.torch  # runs the real torch workload (or probes torch)


def test_local_sweep_runs_and_summarizes(cli, tmp_path):
    run = tmp_path / "run"
    proc = cli("sweep", str(REPO / "sweeps" / "local.toml"), "--backend", "local", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = list(csv.DictReader((run / "summary.csv").open()))
    assert [(r["ranks_per_node"], r["state"]) for r in rows] == [("1", "COMPLETED"), ("2", "COMPLETED")]
    assert all(float(r["throughput"]) > 0 for r in rows)
    assert float(rows[0]["speedup"]) == 1.0
    # The table the user sees names the same points.
    assert "samples/s" in proc.stdout and proc.stdout.count(" COMPLETED ") == 2

    rd = RunDir.open(run)
    [two] = [p for p in rd.points() if p.world_size == 2]
    rec = json.loads(rd.point(two).result.read_text())
    assert rec["schema"] == "hpcbench.result/4"
    assert rec["world_size"] == 2 and rec["backend"] == "gloo" and len(rec["step_times_s"]) == 30
    assert [r["rank"] for r in rec["ranks"]] == [0, 1] and len({r["pid"] for r in rec["ranks"]}) == 2
    # Same rank command line as the job script, run with the environment srun would give.
    assert "--cpu-bind=sockets" in rd.point(two).job_script.read_text()
    events = [json.loads(l)["event"] for l in rd.ledger.read_text().splitlines()]
    assert events == ["submitting", "submitted", "finished"] * 2


def test_unavailable_backend_fails_fast_with_its_reason(cli, tmp_path):
    # torch from PyPI has no MPI: the job must end at start with a clear record, not hang. (The planner
    # would reject the point, but defers to the job when modules may change the ranks' environment.)
    sweep = write(tmp_path / "mpi.toml", "[slurm]\nmodules = ['torch-mpi']\n"
                  "[workload]\nbackend = 'mpi'\nsteps = 2\n[matrix]\nranks_per_node = [2]\n")
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(tmp_path / "run"), timeout=120)
    assert proc.returncode == 1
    [row] = list(csv.DictReader((tmp_path / "run" / "summary.csv").open()))
    assert row["state"] == "FAILED"
    assert "BackendUnavailable: DDP backend 'mpi': this torch is built without mpi" in row["reason"]
    assert "(+1 more ranks failed)" in row["reason"]


def test_local_run_shows_progress_and_the_next_command(cli, tmp_path):
    run = tmp_path / "run"
    proc = cli("sweep", str(REPO / "sweeps" / "local.toml"), "--backend", "local", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.strip().startswith("[1/2] running gloo-mlp-") for line in lines)
    assert any(line.strip().startswith("[2/2] gloo-mlp-") and line.rstrip().endswith(" s)") and ": done (" in line
               for line in lines)
    assert lines[-1].startswith(f"next: hpcbench summarize {run}")


def test_horovod_over_mpi_runs_locally_under_mpirun(cli, tmp_path):
    """The job script would start it with an MPI launcher; so does the local backend (no longer 'horovod sees
    1 ranks, the launcher started 2')."""
    sweep = write(tmp_path / "hvd.toml", "[workload]\nframework = 'horovod'\nbackend = 'mpi'\nsteps = 3\n"
                  "warmup_steps = 1\n[matrix]\nranks_per_node = [2]\n")
    run = tmp_path / "run"
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(run), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rd = RunDir.open(run)
    [p] = rd.points()
    rec = json.loads(rd.point(p).result.read_text())
    assert rec["framework"] == "horovod" and rec["world_size"] == 2 and len({r["pid"] for r in rec["ranks"]}) == 2


def test_the_local_backend_refuses_a_gpu_point_this_machine_cannot_run(cli, tmp_path):
    from hpcbench.plan.limits import probe

    sweep = write(tmp_path / "cuda.toml", "[workload]\ndevice = 'cuda'\nsteps = 2\n")
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(tmp_path / "run"), timeout=300)
    gpus = probe(sys.executable, dict(os.environ)).cuda_devices
    if gpus:  # a machine with a GPU runs it
        assert proc.returncode == 0, proc.stderr
    else:  # refused before anything runs, with the reason and what to do, in one line
        assert proc.returncode == 2 and not (tmp_path / "run").exists()
        assert "torch sees no GPU here" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_point_past_its_time_limit_is_timeout(cli, tmp_path):
    """The backend says so when it ends the ranks (the ledger keeps it): the exit code alone would say FAILED."""
    sweep = write(tmp_path / "slow.toml", '[slurm]\ntime = "00:00:04"\n[workload]\nsteps = 1000000\n'
                                         "[matrix]\nranks_per_node = [1]\n")
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(tmp_path / "run"), timeout=120)
    assert proc.returncode == 1 and ": TIMEOUT (exit 124) (" in proc.stdout, proc.stdout + proc.stderr
    [row] = list(csv.DictReader((tmp_path / "run" / "summary.csv").open()))
    assert (row["state"], row["reason"]) == ("TIMEOUT", "time limit reached (local backend)")
