"""One interface for every way of running a point. All backends write the same run-directory layout."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from hpcbench.plan import Point
from hpcbench.rundir import PointPaths
from hpcbench.spec import SweepSpec


class Backend(ABC):
    name: str
    #: True when submit() returns before the point has run (a scheduler queue)
    queued: bool = True
    #: point id -> the job comment that ties a job to its run and point (set by the submitter)
    comment: Callable[[str], str] | None = None

    def check(self, spec: SweepSpec) -> None:
        """Raise ConfigError before anything is submitted if this backend cannot run the sweep."""

    @abstractmethod
    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> str:
        """Start (or queue) one point and return its job id."""
