"""Ledger, lock, scheduler parsers and state derivation, without a scheduler."""
from __future__ import annotations

import io
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from conftest import DATA, REPO, queue

from hpcbench.errors import ConfigError, RunDirBusy
from hpcbench.files import atomic_write_json
from hpcbench.jobs import Job, SchedulerView
from hpcbench.plan.expand import expand
from hpcbench.plan.spec import parse
from hpcbench.rundir import RunDir
from hpcbench.states import STATES, collect, parse_states, point_state, record_ended
from hpcbench.submit.slurm import JobInfo, parse_sacct, parse_squeue
from hpcbench.submit.status import Progress

GC3PIE_FIELDS = ("JobID", "ExitCode", "State", "NCPUS", "Elapsed", "TotalCPU", "Submit", "Start", "End",
                 "MaxRSS", "MaxVMSize")


def test_sacct_parser_on_real_output():
    jobs = parse_sacct((DATA / "sacct" / "gc3pie-slurm.txt").read_text(), GC3PIE_FIELDS)
    # Steps (101.batch, 103.0) never override their job's own line.
    assert sorted(jobs) == ["101", "102", "103", "104", "105", "106"]
    assert {j: (i.state, i.exit_code) for j, i in jobs.items()} == {
        "101": ("COMPLETED", "0:0"), "102": ("CANCELLED", "0:0"), "103": ("NODE_FAIL", "1:0"),
        "104": ("FAILED", "1:0"), "105": ("TIMEOUT", "0:1"), "106": ("RUNNING", "0:0")}
    assert jobs["106"].active and not jobs["105"].active


def test_sacct_parser_on_our_format():
    text = ("7|FAILED|1:0|NonZeroExitCode|hpcbench:ab12:p1\n7.batch|FAILED|1:0||\n"
            "8|CANCELLED by 0|0:15|None|hpcbench:ab12:p2\n9|OUT_OF_MEMORY|0:125|OutOfMemory|\n")
    jobs = parse_sacct(text)
    assert jobs["7"] == JobInfo("7", "FAILED", "NonZeroExitCode", "hpcbench:ab12:p1", "1:0")
    assert jobs["8"].state == "CANCELLED" and jobs["8"].reason == ""
    assert jobs["9"].state == "OUT_OF_MEMORY"


def test_squeue_parser_on_real_output():
    # Captured from `squeue --noheader --states=all --format=%i|%T|%r|%k` on the local Slurm.
    text = ("1|COMPLETED|None|(null)\n7|FAILED|NonZeroExitCode|hpcbench:abc:123\n"
            "8|PENDING|JobHeldUser|hpcbench:abc:123\n30|PENDING|BeginTime|hpcbench:e1:ce5509d46f\n")
    jobs = parse_squeue(text)
    assert jobs["1"].comment == "" and jobs["7"].reason == "NonZeroExitCode"
    assert jobs["8"].active and not jobs["7"].active and jobs["30"].comment == "hpcbench:e1:ce5509d46f"


def make_run(tmp_path):
    spec = parse("[matrix]\nranks_per_node = [1, 2, 3, 4]\n", "s.toml")
    pts = expand(spec)
    return RunDir.create(tmp_path / "run", spec.text, "s", pts), pts


def test_scheduler_words_become_point_states_with_reasons(tmp_path):
    rd, pts = make_run(tmp_path)
    for i, p in enumerate(pts):
        rd.record("submitted", p.id, job_id=str(100 + i), backend="sbatch")
    view = SchedulerView({
        "100": Job("100", "sbatch", state="TIMEOUT", reason="TimeLimit"),
        "101": Job("101", "sbatch", state="NODE_FAIL", reason="NodeDown", exit_code="1:0"),
        "102": Job("102", "sbatch", state="OUT_OF_MEMORY", reason="OutOfMemory"),
        "103": Job("103", "sbatch", state="COMPLETED", reason="None"),  # Slurm is content, but no result record
    })
    rd.point(pts[3]).exitcode.write_text("0\n")
    got = {s.point.id: s for s in collect(rd, view)}
    assert [got[p.id].state for p in pts] == ["TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "FAILED"]
    assert got[pts[0].id].reason == "Slurm: TIMEOUT (TimeLimit)"
    assert got[pts[1].id].reason == "Slurm: NODE_FAIL (NodeDown), exit 1:0"
    assert "wrote no result record" in got[pts[3].id].reason
    assert all(s.final for s in got.values())


def test_a_summary_reads_the_disk_and_status_keeps_the_schedulers_word_there(tmp_path):
    """Without the scheduler, a job the ledger does not know to be over is UNKNOWN, never guessed; once status
    has heard it end (or found it gone), the ledger keeps that word and the disk alone gives the same states."""
    rd, pts = make_run(tmp_path)
    for i, p in enumerate(pts):
        rd.record("submitted", p.id, job_id=str(400 + i), backend="sbatch")
    disk = collect(rd)
    assert [s.state for s in disk] == ["UNKNOWN"] * 4
    assert "its end is not in the ledger (hpcbench status RUN_DIR asks the scheduler)" in disk[0].reason
    view = SchedulerView({"400": Job("400", "sbatch", state="TIMEOUT", reason="TimeLimit"),
                          "401": Job("401", "sbatch", state="RUNNING", reason="None")})
    live = collect(rd, view)
    assert [s.state for s in live] == ["TIMEOUT", "RUNNING", "MISSING", "MISSING"]
    record_ended(rd, view, live)
    record_ended(rd, view, live)  # once per job
    assert [e["job_id"] for e in rd.events() if e["event"] == "ended"] == ["400", "402", "403"]
    again = collect(rd)
    assert [(s.state, s.reason) for s in again] == [(s.state, s.reason) if s.final else ("UNKNOWN", again[1].reason)
                                                     for s in live]
    assert again[0].reason == "Slurm: TIMEOUT (TimeLimit)"


def test_folder_alone_tells_the_ending_when_the_scheduler_forgot(tmp_path):
    rd, pts = make_run(tmp_path)
    for i, p in enumerate(pts):
        rd.record("submitted", p.id, job_id=str(200 + i), backend="sbatch")
    err = rd.point(pts[0]).stderr("200")
    err.write_text("slurmstepd-node1: error: *** JOB 200 ON node1 CANCELLED AT 2026-11-22T03:34:47 DUE TO "
                   "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n")
    rd.point(pts[1]).stderr("201").write_text("slurmstepd: error: *** JOB 201 ON node2 CANCELLED AT "
                                              "2026-11-22T03:40:00 ***\n")
    rd.point(pts[2]).stderr("202").write_text("slurmstepd: error: Detected 1 oom_kill event in StepId=202.0\n")
    # An older attempt's logs do not speak for the current job.
    rd.point(pts[3]).stderr("150").write_text("*** JOB 150 ON node1 CANCELLED AT 2026 DUE TO TIME LIMIT ***\n")
    got = [s.state for s in collect(rd, queue({}))]
    assert got == ["NODE_FAIL", "CANCELLED", "OUT_OF_MEMORY", "MISSING"]


def test_packed_point_is_over_when_its_own_step_is(tmp_path):
    rd, pts = make_run(tmp_path)
    for p in pts:
        rd.record("submitted", p.id, job_id="300", backend="sbatch", pack="pack-1")
    rd.point(pts[0]).exitcode.write_text("3\n")
    running = Job("300", "sbatch", state="RUNNING", reason="None")
    states = [point_state(p, rd.point(p), rd.submissions()[p.id], running).state for p in pts]
    assert states == ["FAILED", "RUNNING", "RUNNING", "RUNNING"]
    timed_out = Job("300", "sbatch", state="TIMEOUT", reason="TimeLimit")
    s = point_state(pts[1], rd.point(pts[1]), rd.submissions()[pts[1].id], timed_out)
    assert s.state == "TIMEOUT" and s.pack == "pack-1"


def test_interrupted_submission_is_unknown_until_settled(tmp_path):
    rd, pts = make_run(tmp_path)
    rd.record("submitting", pts[0].id, backend="sbatch")
    rd.record("submitting", pts[1].id, backend="sbatch")
    rd.record("submit_lost", pts[1].id, backend="sbatch", reason="x")
    got = [s.state for s in collect(rd, queue({}))]
    assert got[:2] == ["UNKNOWN", "NOT_SUBMITTED"]


def test_state_names_are_checked():
    assert parse_states("failed, timeout,NODE_FAIL") == ("FAILED", "TIMEOUT", "NODE_FAIL")
    with pytest.raises(ConfigError, match="unknown state 'FAIL'.*choose from: PENDING"):
        parse_states("FAIL")
    assert len(STATES) == 12


_HOLD = """
import sys, time
from hpcbench.rundir import RunDir
with RunDir(sys.argv[1]).lock():
    print("locked", flush=True)
    time.sleep(60)
"""


def test_second_submitter_is_refused_and_kill_9_frees_the_lock(tmp_path):
    rd, _ = make_run(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(rd.root)], stdout=subprocess.PIPE, text=True,
                              cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirBusy, match=rf"another hpcbench \(pid {holder.pid}\) is submitting"), rd.lock():
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with rd.lock():  # flock died with its holder: no stale lock to clean up by hand
        pass


def test_archive_moves_an_attempt_aside(tmp_path):
    rd, pts = make_run(tmp_path)
    paths = rd.point(pts[0])
    paths.exitcode.write_text("1\n")
    atomic_write_json(paths.error(0), {"schema": "hpcbench.error/1"})
    paths.archive("77")
    assert not paths.exitcode.exists() and not paths.errors()
    assert sorted(f.name for f in (paths.dir / "attempts" / "77").iterdir()) == ["error-rank0.json", "exitcode"]
    paths.archive("../../x")  # a job id from a tampered ledger stays inside the point folder
    assert not (rd.root.parent / "x").exists()
    with pytest.raises(ConfigError, match="would leave the run directory"):
        rd.point(replace(pts[0], label="../../../etc"))


def test_progress_line_in_place_on_a_tty_one_line_per_change_otherwise():
    plain = io.StringIO()
    bar = Progress(plain)
    for line in ["2 PENDING", "2 PENDING", "1 RUNNING, 1 PENDING", "2 COMPLETED"]:
        bar.show(line)
    bar.done()
    assert plain.getvalue() == "2 PENDING\n1 RUNNING, 1 PENDING\n2 COMPLETED\n"

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    bar = Progress(tty)
    for line in ["1 RUNNING, 1 PENDING", "2 COMPLETED"]:
        bar.show(line)
        time.sleep(0)
    bar.done()
    assert tty.getvalue() == "\r1 RUNNING, 1 PENDING\r2 COMPLETED         \n"


def test_ledger_reread_after_every_append(tmp_path):
    """The parsed ledger is reused only while the file is unchanged: each new line is seen at once,
    by the same RunDir object and by a second one (another process's view)."""
    rd, pts = make_run(tmp_path)
    other = RunDir(rd.root)
    rd.record("submitting", pts[0].id, backend="sbatch")
    assert rd.submissions()[pts[0].id]["event"] == "submitting"
    for n in range(1, 4):
        other.record("submitted", pts[0].id, job_id=str(100 + n), backend="sbatch")
        assert rd.submissions()[pts[0].id]["job_id"] == str(100 + n)
        assert [s["job_id"] for s in rd.submissions().values()] == [str(100 + n)]
    assert rd.recorded_job_ids() == {"101", "102", "103"}


def test_a_run_whose_backend_is_not_installed_says_so_instead_of_blaming_the_queue(tmp_path):
    """Jobs submitted elsewhere with a backend this install lacks: the view says which backend, and a re-run
    refuses (their jobs may live) with that reason, not a scheduler's."""
    from hpcbench.errors import SchedulerError
    from hpcbench.submit import registry
    from hpcbench.submit.status import scheduler_view
    from hpcbench.submit.submission import submit_points

    rd, pts = make_run(tmp_path)
    for i, p in enumerate(pts):
        rd.record("submitted", p.id, job_id=str(500 + i), backend="gone")
    view = scheduler_view(rd)
    assert not view.read and view.why == "backend 'gone', which submitted 4 of its jobs, is not installed here"
    assert [s.state for s in collect(rd, view)] == ["UNKNOWN"] * 4
    with pytest.raises(SchedulerError, match=r"the queue cannot be read \(backend 'gone', .*not installed here\), "
                                             r"so it is not known whether the jobs of 4 point\(s\)") as e:
        submit_points(parse("[matrix]\nranks_per_node = [1, 2, 3, 4]\n", "s.toml"), rd, sys.executable,
                      registry.create("local"), print)
    assert e.value.hint == "install the package that provides the 'gone' backend, or run this where it is"
    assert not [e for e in rd.events() if e["event"] not in ("submitted",)]


def test_a_backend_without_a_queue_says_how_its_job_ended_and_old_ledgers_read_as_before(tmp_path):
    """Its word (Job.ran) is kept on the ledger's finished line, whatever the backend; a finished line without
    it (a run made before) is read from the folder, as it always was."""
    rd, pts = make_run(tmp_path)
    words = [Job("j0", "bash").ran(124, "time limit of 5 s reached"), Job("j1", "bash").ran(3),
             Job("j2", "bash").ran(0), None]
    for p, job in zip(pts, words):
        rd.record("submitted", p.id, job_id=f"j{pts.index(p)}", backend="bash")
        rd.point(p).exitcode.write_text(f"{job.exit_code if job else 124}\n")
        said = {"state": job.state, "reason": job.reason} if job else {}
        rd.record("finished", p.id, job_id=f"j{pts.index(p)}", backend="bash", exit_code="x", **said)
    assert [(w.state, w.exit_code) for w in words if w] == [("TIMEOUT", "124"), ("FAILED", "3"), ("COMPLETED", "0")]
    got = [(s.state, s.reason) for s in collect(rd)]
    assert got == [("TIMEOUT", "time limit of 5 s reached"), ("FAILED", "exit code 3"),
                   ("FAILED", "the job exited 0 but wrote no result record"), ("FAILED", "exit code 124")]
