from __future__ import annotations

from pathlib import Path

from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit import slurm
from hpcbench.submit.backends.base import Backend


class SbatchBackend(Backend):
    """Submit the rendered job script as it is: what runs is exactly what a person can read."""

    name = "sbatch"
    packs = True

    def __init__(self, hold: bool = False) -> None:
        # --hold: queued but never started until `scontrol release`; for dry submissions and benchmarks.
        self.extra: tuple[str, ...] = ("--hold",) if hold else ()

    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> str:
        return slurm.sbatch(paths.job_script, self.extra)

    def submit_script(self, script: Path) -> str:
        return slurm.sbatch(script, self.extra)
