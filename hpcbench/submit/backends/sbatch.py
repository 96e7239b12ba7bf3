"""Slurm's sbatch: the rendered job script is submitted as it is, so what runs is exactly what a person can read."""

from __future__ import annotations

from pathlib import Path

from hpcbench.jobs import Job
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit import slurm
from hpcbench.submit.backends.base import SlurmQueue


class SbatchBackend(SlurmQueue):
    packs = True
    holds = True  # --hold: queued but never started until `scontrol release`; for dry submissions and benchmarks
    concurrent_submit = True
    auto_rank = 2

    def _extra(self) -> tuple[str, ...]:
        return ("--hold",) if self.hold else ()

    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> Job:
        return self.job(slurm.sbatch(paths.job_script, self._extra()), paths)

    def submit_script(self, script: Path) -> Job:
        return self.job(slurm.sbatch(script, self._extra()))
