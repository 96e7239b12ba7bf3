"""How fast is planning on a login node? Prints figures; not a test.

    .venv/bin/python benchmarks/plan_speed.py [SWEEP] [--runs N]

Times `hpcbench plan SWEEP` (equivalently `sweep --dry-run`) as a fresh process, the way a user
runs it, and reports which heavy libraries it imported (it should import none).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep", nargs="?", default=str(REPO / "sweeps" / "scaling.toml"))
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "hpcbench", "plan", args.sweep, "--run-dir", f"{tmp}/r{i}"],
                           check=True, capture_output=True, cwd=REPO)
            times.append(time.perf_counter() - t0)
        points = len(list(Path(f"{tmp}/r0/points").glob("*/job.sh")))
        probe = (f"import sys, hpcbench.cli as c; c.main(['plan', {args.sweep!r}, '--run-dir', '{tmp}/probe']);"
                 "print(','.join(m for m in ('torch','pandas','matplotlib','submitit','numpy') if m in sys.modules))")
        heavy = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False, text=True, cwd=REPO).stdout.splitlines()[-1]
    print(f"sweep: {args.sweep}")
    print(f"points (job scripts written): {points}")
    print(f"hpcbench plan, fresh process, {args.runs} runs: median {statistics.median(times) * 1e3:.0f} ms, "
          f"min {min(times) * 1e3:.0f} ms, max {max(times) * 1e3:.0f} ms")
    print(f"heavy modules imported while planning: {heavy or 'none'}")


if __name__ == "__main__":
    main()
