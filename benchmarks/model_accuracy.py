"""How well does explain's scaling model predict the step time? Prints figures; not a test.

    PYTHONPATH=. .venv/bin/python benchmarks/model_accuracy.py [--sweep sweeps/backends.toml]
    PYTHONPATH=. .venv/bin/python benchmarks/model_accuracy.py --runs RUN_DIR [RUN_DIR ...]

Without --runs it runs the sweep (default sweeps/backends.toml) and, beside it, an allreduce sweep over
the same frameworks, backends and placements (the curves the model is fitted to), both with --wait on
whatever `hpcbench sweep` picks (the minicluster's Slurm when sbatch is on PATH). Then, for every
training point of more than one rank, the model's step time (compute-only time + the allreduce of the
model's gradients not hidden behind backward, explain/model.py) against the measured one, and the
median absolute relative error.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import tomllib

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from hpcbench.explain.model import BYTES_PER_PARAM  # noqa: E402
from hpcbench.vocab import MODELS  # noqa: E402

PLACEMENT = ("framework", "backend", "nodes", "ranks_per_node")


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _table(name: str, body: dict[str, Any]) -> list[str]:
    out = [f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in body.items() if not isinstance(v, dict)]
    for k, v in body.items():
        if isinstance(v, dict):
            out += _table(f"{name}.{k}", v)
    return out


def allreduce_sweep(train: dict[str, Any]) -> str:
    """The allreduce points at the training sweep's placements: same cluster settings, same axes but the model."""
    matrix = {k: v for k, v in train.get("matrix", {}).items() if k in PLACEMENT}
    work = {k: train.get("workload", {})[k] for k in ("device",) if k in train.get("workload", {})}
    # up to the largest model's gradients (float32), not beyond: over a 100 Mbit/s link a 64 MiB allreduce is seconds
    models = train.get("matrix", {}).get("model") or [train.get("workload", {}).get("model", "resnet50")]
    grads = max(MODELS[m].params * BYTES_PER_PARAM for m in (models if isinstance(models, list) else [models]))
    top = 1 << max(12, (2 * grads - 1).bit_length())
    work.update(kind="collective", min_bytes=1024, max_bytes=top, step_factor=2, iters=20, warmup_iters=5)
    lines = [f"cluster = {_toml_value(train['cluster'])}"] if "cluster" in train else []
    lines += _table("sweep", {"name": f"{train['sweep']['name']}-allreduce",
                             "description": "allreduce curves for the scaling model"})
    lines += _table("slurm", train.get("slurm", {})) + _table("workload", work) + _table("matrix", matrix)
    for ex in train.get("exclude", []):
        lines += ["[[exclude]]"] + [f"{k} = {_toml_value(v)}" for k, v in ex.items() if k in PLACEMENT]
    return "\n".join(lines) + "\n"


def run_sweeps(sweep: Path, where: Path) -> list[Path]:
    train = tomllib.loads(sweep.read_text())
    where.mkdir(parents=True, exist_ok=True)
    ar = where / "allreduce.toml"
    ar.write_text(allreduce_sweep(train))
    runs = []
    for f, name in ((sweep, "train"), (ar, "allreduce")):
        rd = where / name
        print(f"running {f} into {rd} ...", flush=True)
        subprocess.run([sys.executable, "-m", "hpcbench", "sweep", str(f), "--wait", "--run-dir", str(rd)],
                       check=True, stdout=subprocess.DEVNULL)
        runs.append(rd)
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", type=Path, default=REPO / "sweeps/backends.toml")
    ap.add_argument("--runs", nargs="+", type=Path, help="measure these run directories instead of running")
    ap.add_argument("--keep", type=Path, help="run into this folder (kept) instead of a temporary one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hpcbench-model-") as tmp:
        runs = args.runs or run_sweeps(args.sweep, args.keep or Path(tmp))
        report(runs)


def report(runs: list[Path]) -> None:
    from hpcbench.explain import bounds
    from hpcbench.explain.inputs import subjects
    from hpcbench.figures import baseline
    from hpcbench.figures.aggregate import aggregate
    from hpcbench.figures.inputs import load

    aggs = aggregate(load([str(r) for r in runs]).samples)
    baseline.apply(aggs, "auto")
    points = subjects(aggs)
    fitted = bounds.fits(points)
    for key, fit in sorted(fitted.items(), key=str):
        print(f"curve {'/'.join(map(str, key or ('--allreduce',)))}: {fit.describe()}")
    rows, errors = [], []
    for p in points:
        if p.kind != "train" or not p.ok or (p.world_size or 1) < 2 or not p.step_time_s:
            continue
        pred, _, missing = bounds.prediction(p, fitted)
        if pred is None:
            rows.append((p.label, f"{p.step_time_s * 1e3:.1f}", "—", "—", "—", "—", f"no model: {missing}"))
            continue
        err = (pred.step_s - p.step_time_s) / p.step_time_s
        errors.append(abs(err))
        comm = f"{p.comm_fraction:.0%}" if p.comm_fraction is not None else "—"
        rows.append((p.label, f"{p.step_time_s * 1e3:.1f}", f"{pred.step_s * 1e3:.1f}",
                     f"{pred.compute_s * 1e3:.1f}", f"{pred.comm_s * 1e3:.2f}", comm, f"{err:+.0%}"))
    head = ("point", "measured ms", "model ms", "compute ms", "allreduce ms", "comm share", "error")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    if errors:
        print(f"median absolute error: {statistics.median(errors):.0%} over {len(errors)} points "
              f"(max {max(errors):.0%})")
    else:
        print("no point could be modelled")


if __name__ == "__main__":
    main()
