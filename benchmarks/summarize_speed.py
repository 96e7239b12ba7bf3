"""How long does summarize take on a big run? Prints figures; not a test.

    PYTHONPATH=. .venv/bin/python benchmarks/summarize_speed.py [--records 10000] [--repeats 4]

Builds a run directory of RECORDS result records (points x repeats over frameworks, backends,
models, 1-64 nodes and 1-8 ranks per node, with some failed points), then times, as a fresh
process the way a user runs it, `hpcbench summarize RUN --out DIR` (reading every record, all
tables, the four plots, report.md, records.csv/json, the history rows), and the same with --no-plots,
and with --no-plots --no-history (the cost of recording the history).
Goal: <= 5 s for 10,000 records.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hpcbench.plan.expand import Point, point_id
from hpcbench.records import ErrorRecord, RankInfo, ResultRecord
from hpcbench.rundir import RunDir


def build_run(root: Path, records: int, repeats: int) -> RunDir:
    combos = itertools.product(("ddp", "horovod"), ("nccl", "gloo", "mpi"), ("resnet50", "lstm", "mnist_cnn"),
                               (32, 64), (1, 2, 4, 8, 16, 32, 64), (1, 2, 4, 8))
    points: list[Point] = []
    for fw, be, model, batch, nodes, rpn in combos:
        for rep in range(repeats):
            params = {"backend": be, "model": model, "batch_size": batch, "nodes": nodes, "ranks_per_node": rpn,
                      "gpus_per_node": rpn, "framework": fw, "kind": "train", "device": "cuda", "data": "synthetic",
                      "steps": 50, "warmup_steps": 5, "lr": 0.01, "repeat": rep}
            points.append(Point(id=point_id(params), label=f"{fw}-{be}-{model}-b{batch}-n{nodes}x{rpn}-r{rep}", **params))
    while len(points) < records:  # more repeats of the same points, until the count is reached
        p = points[len(points) % 1000]
        params = {**p.to_dict(), "repeat": p.repeat + repeats * (1 + len(points) // 1000)}
        params.pop("id"), params.pop("label")
        points.append(Point(id=point_id(params), label=p.label + f"-x{len(points)}", **params))
    points = points[:records]
    rd = RunDir.create(root, "", "bench", points)
    with open(rd.ledger, "w", encoding="utf-8") as ledger:
        for n, p in enumerate(points):
            ledger.write(json.dumps({"schema": "hpcbench.ledger/1", "time": "t", "event": "submitted",
                                     "point_id": p.id, "job_id": str(n), "backend": "local"}) + "\n")
            d = rd.point(p).dir
            if n % 97 == 0:  # a failed point now and then: its row must still be there
                err = ErrorRecord(point_id=p.id, rank=0, hostname="n1", error_type="RuntimeError",
                                  message="NCCL error: unhandled system error", traceback="", time="t")
                (d / "error-rank0.json").write_text(json.dumps(err.to_dict()))
                continue
            w = p.world_size
            step = 0.1 * (1 + 0.02 * (w ** 0.5)) * (1 + 0.01 * (n % 7))
            steps = [step * (1 + 0.003 * (k % 5)) for k in range(50)]
            mean = sum(steps) / len(steps)
            rec = ResultRecord(
                point_id=p.id, label=p.label, framework=p.framework, backend=p.backend, model=p.model, device="cuda",
                batch_size=p.batch_size, nodes=p.nodes, ranks_per_node=p.ranks_per_node, world_size=w,
                warmup_steps=5, steps=50, step_times_s=steps, mean_step_time_s=mean,
                throughput=p.batch_size * w / mean, throughput_per_rank=p.batch_size / mean,
                ranks=[RankInfo(rank=0, local_rank=0, hostname="n1", slurm_node="n1", pid=1, cpus=[0])],
                started_at="t", finished_at="t", job_id=str(n), measurement="synthetic benchmark record",
                comm_time_s=mean * 0.2, compute_time_s=mean * 0.8, comm_fraction=0.2, comm_method="hooks")
            (d / "result.json").write_text(json.dumps(rec.to_dict()))
    return rd


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child): on a shared machine the CPU time is the steadier figure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          check=False)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.exit(f"summarize failed ({proc.returncode}): {proc.stderr.strip()}")
    return dt, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rd = build_run(Path(tmp) / "run", args.records, args.repeats)
        print(f"built a run of {args.records} records in {time.perf_counter() - t0:.1f} s: {rd.root}")
        # summarize records every row into the history database: a temporary one here, not the user's
        os.environ["HPCBENCH_HISTORY"] = str(Path(tmp) / "history.sqlite")
        cmd = [sys.executable, "-m", "hpcbench", "summarize", str(rd.root), "--out", str(Path(tmp) / "out")]
        full = [timed(cmd) for _ in range(args.runs)]
        bare = [timed([*cmd, "--no-plots"]) for _ in range(args.runs)]
        unrecorded = [timed([*cmd, "--no-plots", "--no-history"]) for _ in range(args.runs)]
        rows = len((Path(tmp) / "out" / "records.csv").read_text().splitlines()) - 1
        print(f"records in records.csv: {rows}; plots: {sorted(p.name for p in (Path(tmp) / 'out').glob('*.png'))}")
        print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        wall, cpu = min(w for w, _ in full), min(c for _, c in full)
        print(f"summarize, tables + 4 plots + report.md (fresh process): wall best {wall:.2f} s "
              f"(median {sorted(w for w, _ in full)[len(full) // 2]:.2f} s), CPU {cpu:.2f} s, over {args.runs} runs")
        print(f"summarize --no-plots (fresh process): wall best {min(w for w, _ in bare):.2f} s, "
              f"CPU {min(c for _, c in bare):.2f} s")
        print(f"summarize --no-plots --no-history (fresh process): wall best {min(w for w, _ in unrecorded):.2f} s, "
              f"CPU {min(c for _, c in unrecorded):.2f} s (the difference is recording {args.records} history rows)")
        print(f"goal <= 5 s: wall {'met' if wall <= 5 else 'NOT met'}, CPU {'met' if cpu <= 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
