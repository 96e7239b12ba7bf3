"""Speed of hpcbench's own operations. Prints figures; not a test.

    PYTHONPATH=. .venv/bin/python benchmarks/ops_speed.py [--points 10000] [--jobs 200] [--no-slurm]

1. plan + render: expand a 10,000-point sweep and render every job script, in one process (wall and
   CPU seconds: on a shared machine the CPU figure is the one that does not depend on the neighbours),
   and the whole `hpcbench plan` command, files included, as a fresh process. Then the same 10,000
   points over three extra axes (steps, cpus_per_task and [matrix.env] NCCL_IB_DISABLE, 2 values each,
   crossed with batch_size), reading the sweep file included: the goal is under 1 s.
2. submit: `hpcbench sweep` of 200 points to the local Slurm against 200 bare `sbatch --wrap` calls
   from a shell loop, in the same run. Every job is submitted with --hold, so none ever runs or
   clogs the shared queue; exactly those job ids are cancelled afterwards.
3. status: `hpcbench status` of those 200 jobs, with squeue and sacct counted by a PATH shim.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


# Three extra axes of two values each: steps (a parameter), cpus_per_task (a measured [slurm] setting) and an
# environment variable; batch_size makes up the rest of the points.
AXES3 = '''steps = [2, 4]
cpus_per_task = [1, 2]
[matrix.env]
NCCL_IB_DISABLE = ["0", "1"]
'''


def sweep_file(folder: Path, points: int, extra: str = "", axes: str = "", combos: int = 1) -> Path:
    """A sweep of ``points`` points: batch_size times the ``combos`` combinations of the other ``axes``."""
    folder.mkdir(parents=True, exist_ok=True)
    sizes = ", ".join(str(i + 1) for i in range(points // combos))
    path = folder / f"bench{points}{'-axes' if axes else ''}.toml"
    path.write_text(f"[sweep]\nname = \"bench\"\n[slurm]\ntime = \"2\"\n{extra}\n[workload]\nsteps = 2\n"
                    f"[matrix]\nbatch_size = [{sizes}]\n{axes}")
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hpcbench", *args], capture_output=True, text=True, cwd=REPO, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    if proc.returncode != 0:
        raise SystemExit(f"hpcbench {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return time.perf_counter() - t0, proc


def bench_plan(tmp: Path, n: int) -> None:
    from hpcbench.plan.expand import expand
    from hpcbench.plan.spec import load
    from hpcbench.rundir import PointPaths
    from hpcbench.submit.render import render_job

    spec = load(sweep_file(tmp, n))
    c0, t0 = time.process_time(), time.perf_counter()
    points = expand(spec)
    for p in points:
        render_job(spec, p, PointPaths(tmp / "r" / p.dirname), sys.executable, f"hpcbench:0123456789ab:{p.id}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"plan+render {len(points)} points in one process: {wall:.2f} s wall, {cpu:.2f} s CPU "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    secs, _ = cli("plan", str(spec.path), "--run-dir", str(tmp / "plan"))
    scripts = sum(1 for _ in (tmp / "plan" / "points").glob("*/job.sh"))
    print(f"hpcbench plan, fresh process, {scripts} job scripts written: {secs:.2f} s wall")
    path = sweep_file(tmp, n, axes=AXES3, combos=8)
    c0, t0 = time.process_time(), time.perf_counter()
    spec = load(path)
    points = expand(spec)
    for p in points:
        render_job(spec, p, PointPaths(tmp / "r" / p.dirname), sys.executable, f"hpcbench:0123456789ab:{p.id}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"read + plan + render {len(points)} points with three extra axes (steps, cpus_per_task, env), one process: "
          f"{wall:.2f} s wall, {cpu:.2f} s CPU (goal < 1 s; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs; e.g. {points[-1].label})")


def _bare_loop(n: int) -> tuple[float, list[str]]:
    loop = (f"for i in $(seq {n}); do sbatch --parsable --hold --time=2 --job-name=bare "
            f"--output=/dev/null --wrap=true || exit 1; done")
    t0 = time.perf_counter()
    out = subprocess.run(["bash", "-c", loop], capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - t0, [line.split(";")[0] for line in out.split()]


def _status_calls(tmp: Path, run: Path, n: int) -> None:
    shim, log = tmp / "shim", tmp / "calls.log"
    shim.mkdir()
    for tool in ("squeue", "sacct"):
        real = shutil.which(tool)
        (shim / tool).write_text(f"#!/bin/sh\necho {tool} >> {log}\nexec {real} \"$@\"\n")
        (shim / tool).chmod(0o755)
    secs, proc = cli("status", str(run), env={"PATH": f"{shim}:{os.environ['PATH']}"})
    calls = log.read_text().split() if log.exists() else []
    print(f"status of {n} jobs: {calls.count('squeue')} squeue call(s), {calls.count('sacct')} sacct call(s), "
          f"{secs:.2f} s; {proc.stdout.strip().splitlines()[-1]}")


def bench_submit_and_status(tmp: Path, n: int, rounds: int) -> None:
    """Each round: the bare loop, then hpcbench three ways; every job of the round is cancelled at its end."""
    from hpcbench.rundir import RunDir
    from hpcbench.submit.submission import SUBMIT_WORKERS, WORKERS_ENV

    ways = {f"hpcbench sweep ({SUBMIT_WORKERS} sbatch calls in flight)": ("", {}),
            "hpcbench sweep (one sbatch at a time)": ("", {WORKERS_ENV: "1"}),
            "hpcbench sweep, pack = true": ("pack = true", {})}
    ratios: dict[str, list[float]] = {w: [] for w in ways}
    for r in range(rounds):
        ids: list[str] = []
        runs: list[Path] = []
        try:
            bare, ids = _bare_loop(n)
            line = [f"round {r + 1}: {n} bare sbatch --wrap calls {bare:.2f} s"]
            for i, (way, (extra, env)) in enumerate(ways.items()):
                runs.append(tmp / f"r{r}-{i}")
                secs, _ = cli("sweep", str(sweep_file(tmp / f"s{i}", n, extra)), "--backend", "sbatch", "--hold",
                              "--run-dir", str(runs[-1]), env=env)
                ratios[way].append(secs / bare)
                line.append(f"{way} {secs:.2f} s (x{secs / bare:.2f})")
            print("; ".join(line))
            if r == 0:
                _status_calls(tmp, runs[0], n)
        finally:
            ids += [s["job_id"] for run in runs if (run / "ledger.jsonl").exists()
                    for s in RunDir(run).submissions().values() if s.get("job_id")]
            for i in range(0, len(ids), 500):
                subprocess.run(["scancel", *ids[i:i + 500]], check=False)
    for way, values in ratios.items():
        print(f"submit {n} points, {way} / {n} bare sbatch calls: median ratio {statistics.median(values):.2f} "
              f"over {len(values)} round(s) (whole command: start-up, plan, render, ledger, sbatch)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the submit comparison")
    ap.add_argument("--no-slurm", action="store_true", help="only the planning figure")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_plan(Path(tmp), args.points)
        if not args.no_slurm:
            bench_submit_and_status(Path(tmp), args.jobs, args.rounds)


if __name__ == "__main__":
    main()
