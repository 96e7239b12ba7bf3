"""How long does `hpcbench history` take over a large history? Prints figures; not a test.

    PYTHONPATH=. .venv/bin/python benchmarks/history_speed.py [--records 100000] [--runs 3]

Fills a history database in a temporary folder with RECORDS rows (points x runs x repeats over
frameworks, backends, models, 1-64 nodes and 1-8 ranks per node, one run a day, some failed rows), the
rows summarize writes, then times as a fresh process, the way a user runs it: `hpcbench history`
(table + trend plot), the same with --no-plot, and with --model (an indexed filter).
Goal: under 1 s for 100,000 records.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from summarize_speed import timed  # (wall s, CPU s) of a fresh process; exits on a failure

from hpcbench.plan.fields import BY_NAME
from hpcbench.report import history

REPEATS = 5


def rows(records: int) -> list[dict]:
    combos = list(itertools.product(("ddp", "horovod"), ("nccl", "gloo", "mpi"), ("resnet50", "lstm_lm", "mnist_cnn"),
                                    (1, 2, 4, 8, 16, 32, 64), (1, 2, 4, 8)))
    n_runs = max(1, math.ceil(records / (len(combos) * REPEATS)))
    noise = random.Random(14)
    out = []
    for run in range(n_runs):
        date = f"2026-{1 + run // 28:02d}-{1 + run % 28:02d}T10:00:00+00:00"
        for fw, be, model, nodes, rpn in combos:
            params = {p.name: p.default for p in BY_NAME.values()}
            params.update(framework=fw, backend=be, model=model, nodes=nodes, ranks_per_node=rpn, gpus_per_node=rpn,
                          device="cuda", batch_size=64)
            key = history.point_key("bench", params)
            for rep in range(REPEATS):
                if len(out) >= records:
                    return out
                ok = (run + rep + nodes) % 53 != 0
                thr = 1000.0 * nodes * rpn * noise.gauss(1.0, 0.03) if ok else None
                out.append({"run": f"run{run}", "source": f"/runs/run{run}", "point_key": key,
                            "repeat": rep, "point_id": f"{key[:10]}{rep}", "cluster": "bench", "date": date,
                            "params": "{}", "versions": '{"torch": "2.14.1"}', "hpcbench_commit": "abc",
                            "hpcbench_version": "0.1.0", "label": f"{fw}-{be}-{model}-{nodes}x{rpn}",
                            "state": "COMPLETED" if ok else "FAILED", "ok": int(ok), "throughput": thr,
                            "step_time_ms": 64 * nodes * rpn / thr * 1e3 if thr else None,
                            "reason": "" if ok else "NCCL error", **params, "repeat_": rep})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "history.sqlite"
        made = rows(args.records)
        for r in made:
            r["repeat"] = r.pop("repeat_")
        t0 = time.perf_counter()
        history.record(made, db)
        print(f"recorded {len(made)} rows in one transaction: {time.perf_counter() - t0:.2f} s "
              f"({db.stat().st_size / 1e6:.1f} MB)")
        base = [sys.executable, "-m", "hpcbench", "history", "--history", str(db)]
        cases = {"history (table + trend plot)": [*base, "--plot", str(Path(tmp) / "trend.png")],
                 "history --no-plot": [*base, "--no-plot"],
                 "history --model resnet50 --no-plot": [*base, "--model", "resnet50", "--no-plot"]}
        said = subprocess.run(cases["history --no-plot"], capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.strip().splitlines()
        print(said[-1] if said else "history printed nothing")
        for name, argv in cases.items():
            got = [timed(argv) for _ in range(args.runs)]
            walls = sorted(w for w, _ in got)
            print(f"{name}: wall best {walls[0]:.2f} s, median {walls[len(walls) // 2]:.2f} s, "
                  f"CPU {min(c for _, c in got):.2f} s")
        print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; goal < 1 s")


if __name__ == "__main__":
    main()
