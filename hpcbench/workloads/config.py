"""TrainConfig: the dataclass behind the rank command line (the CLI is a thin layer over it)."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass, fields
from typing import Any

from hpcbench.plan import Point


@dataclass(frozen=True)
class TrainConfig:
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
    fail_rank: int = -1  # fault injection: this rank fails at fail_step (0: never joins); < 0: off
    fail_step: int = 1

    @classmethod
    def from_point(cls, p: Point, out: str) -> TrainConfig:
        names = {f.name for f in fields(cls)}
        return cls(out=out, point_id=p.id, timeout_s=p.init_timeout_s,
                   **{k: v for k, v in p.to_dict().items() if k in names and k != "out"})

    def to_argv(self) -> list[str]:
        argv = []
        for f in fields(self):
            if f.name in ("fail_rank", "fail_step") and getattr(self, f.name) == f.default:
                continue  # fault injection stays out of ordinary job scripts
            argv += [f"--{f.name.replace('_', '-')}", str(getattr(self, f.name))]
        return argv

    @classmethod
    def from_argv(cls, argv: list[str] | None) -> TrainConfig:
        ap = argparse.ArgumentParser(prog="python -m hpcbench.workloads.train",
                                     description="One rank of an hpcbench training point.")
        for f in fields(cls):
            kind: Any = {"int": int, "float": float}.get(str(f.type), str)
            required = f.default is MISSING
            ap.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, type=kind, required=required,
                            **({} if required else {"default": f.default}))
        return cls(**vars(ap.parse_args(argv)))
