from __future__ import annotations

from hpcbench import slurmcli
from hpcbench.backends.base import Backend
from hpcbench.plan import Point
from hpcbench.rundir import PointPaths
from hpcbench.spec import SweepSpec


class SbatchBackend(Backend):
    """Submit the rendered job script as it is: what runs is exactly what a person can read."""

    name = "sbatch"

    def __init__(self, hold: bool = False) -> None:
        # --hold: queued but never started until `scontrol release`; for dry submissions and benchmarks.
        self.extra: tuple[str, ...] = ("--hold",) if hold else ()

    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> str:
        return slurmcli.sbatch(paths.job_script, self.extra)
