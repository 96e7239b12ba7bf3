"""One interface for every way of running a point. All backends write the same run-directory layout."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from hpcbench.errors import ConfigError
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths


class Backend(ABC):
    name: str
    #: True when submit() returns before the point has run (a scheduler queue)
    queued: bool = True
    #: point id -> the job comment that ties a job to its run and point (set by the submitter)
    comment: Callable[[str], str] | None = None
    #: can queue a script of its own that runs many points as job steps (slurm.pack)
    packs: bool = False
    #: a backend that runs points itself (not queued) calls this with the seconds so far, about once a second
    on_tick: Callable[[float], None] | None = None

    def check(self, spec: SweepSpec) -> None:
        """Raise ConfigError before anything is submitted if this backend cannot run the sweep."""
        if spec.slurm.pack and self.queued and not self.packs:
            raise ConfigError(f"slurm.pack = true needs --backend sbatch, not {self.name!r}",
                              hint="run with --backend sbatch, or set pack = false")

    @abstractmethod
    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> str:
        """Start (or queue) one point and return its job id."""

    def submit_script(self, script: Path) -> str:
        """Queue a rendered batch script of hpcbench's own (a pack of points) and return its job id."""
        raise ConfigError(f"the {self.name} backend cannot queue a pack of points (slurm.pack = true)",
                          hint="run with --backend sbatch, or set pack = false")
