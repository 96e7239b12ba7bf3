"""Rank configs: the dataclasses behind each workload's command line (the CLI is a thin layer over them)."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass, fields
from typing import Any

from hpcbench.plan import Point


class RankConfig:
    """Round trip Point -> argv -> config, for any dataclass of str/int/float fields."""

    out: str
    point_id: str
    prog = "python -m hpcbench.workloads"

    @classmethod
    def from_point(cls, p: Point, out: str) -> Any:
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(out=out, point_id=p.id, **{k: v for k, v in p.to_dict().items() if k in names and k != "out"})

    def to_argv(self) -> list[str]:
        argv = []
        for f in fields(self):  # type: ignore[arg-type]
            argv += [f"--{f.name.replace('_', '-')}", str(getattr(self, f.name))]
        return argv

    @classmethod
    def from_argv(cls, argv: list[str] | None) -> Any:
        ap = argparse.ArgumentParser(prog=cls.prog, description=f"One rank of an hpcbench point ({cls.__name__}).")
        for f in fields(cls):  # type: ignore[arg-type]
            kind: Any = {"int": int, "float": float}.get(str(f.type), str)
            required = f.default is MISSING
            ap.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, type=kind, required=required,
                            **({} if required else {"default": f.default}))
        return cls(**vars(ap.parse_args(argv)))


@dataclass(frozen=True)
class TrainConfig(RankConfig):
    out: str  # the point's folder
    point_id: str
    label: str
    model: str
    backend: str
    device: str
    batch_size: int
    steps: int
    warmup_steps: int
    lr: float
    nodes: int
    ranks_per_node: int
    framework: str = "ddp"
    data: str = "synthetic"
    timeout_s: int = 600  # process-group timeout: a broken peer ends the job instead of hanging it

    prog = "python -m hpcbench.workloads.train"


@dataclass(frozen=True)
class AllreduceConfig(RankConfig):
    out: str
    point_id: str
    label: str
    framework: str
    backend: str
    device: str
    nodes: int
    ranks_per_node: int
    min_bytes: int = 8
    max_bytes: int = 1 << 30
    step_factor: int = 2
    dtype: str = "float32"
    warmup_iters: int = 5
    iters: int = 20
    timeout_s: int = 300  # start-up and collective timeout: a missing peer ends the job instead of hanging it

    prog = "python -m hpcbench.workloads.allreduce"
