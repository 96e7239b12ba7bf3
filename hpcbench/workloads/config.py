"""Rank configs: the dataclasses behind each workload's command line (the CLI is a thin layer over them)."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from typing import Any, NamedTuple

from hpcbench.plan import Point
from hpcbench.spec import AllreduceSizes


def _bool(text: str) -> bool:
    if text not in ("True", "False"):
        raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")
    return text == "True"


_PARSERS: dict[str, Any] = {"int": int, "float": float, "bool": _bool, "int | None": int}


class _Flag(NamedTuple):
    name: str
    flag: str
    omit_default: bool
    default: Any


@cache
def _flags(cls: type) -> tuple[frozenset[str], tuple[_Flag, ...]]:
    """A config class's field names, and its command-line flags in argv order (once per class: rendering
    10,000 job scripts must not walk the dataclass fields 10,000 times)."""
    fs = fields(cls)  # type: ignore[arg-type]
    # Keyword-only fields (mixed-in groups such as AllreduceSizes) after the point's own.
    flags = tuple(_Flag(f.name, f"--{f.name.replace('_', '-')}", bool(f.metadata.get("omit_default")), f.default)
                  for f in sorted(fs, key=lambda f: f.kw_only))
    return frozenset(f.name for f in fs) - {"out"}, flags


class RankConfig:
    """Round trip Point -> argv -> config, for the dataclass of any workload."""

    prog = "python -m hpcbench.workloads"

    @classmethod
    def from_point(cls, p: Point, out: str, **overrides: Any) -> Any:
        names = _flags(cls)[0]
        kw = {k: v for k, v in p.to_dict().items() if k in names}
        kw.update(overrides)
        return cls(out=out, point_id=p.id, **kw)

    def to_argv(self) -> list[str]:
        argv = []
        for f in _flags(type(self))[1]:
            value = getattr(self, f.name)
            if f.omit_default and value == f.default:
                continue
            argv += [f.flag, str(value)]
        return argv

    @classmethod
    def from_argv(cls, argv: list[str] | None) -> Any:
        ap = argparse.ArgumentParser(prog=cls.prog, description=f"One rank of an hpcbench point ({cls.__name__}).")
        for f in fields(cls):  # type: ignore[arg-type]
            kind: Any = _PARSERS.get(str(f.type), str)
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
    # Issue 3's keys: on the command line only when not at their default, so that job scripts of
    # plain DDP points read as before.
    data_dir: str | None = field(default=None, metadata={"omit_default": True})
    scaling: str = field(default="weak", metadata={"omit_default": True})
    global_batch_size: int | None = field(default=None, metadata={"omit_default": True})
    lr_scaling: bool = field(default=True, metadata={"omit_default": True})
    checkpoint: bool = field(default=False, metadata={"omit_default": True})
    timeline: bool = field(default=False, metadata={"omit_default": True})
    comm_split: bool = field(default=True, metadata={"omit_default": True})
    # Fault injection (issue 6): this rank fails at fail_step (0: never joins); < 0: off. Kept out of
    # ordinary job scripts.
    fail_rank: int = field(default=-1, metadata={"omit_default": True})
    fail_step: int = field(default=1, metadata={"omit_default": True})

    prog = "python -m hpcbench.workloads.train"

    @classmethod
    def from_point(cls, p: Point, out: str, **overrides: Any) -> TrainConfig:
        # The sweep's init_timeout_s is the ranks' process-group timeout.
        return super().from_point(p, out, **{"timeout_s": p.init_timeout_s, **overrides})


@dataclass(frozen=True)
class AllreduceConfig(RankConfig, AllreduceSizes):
    out: str
    point_id: str
    label: str
    framework: str
    backend: str
    device: str
    nodes: int
    ranks_per_node: int
    timeout_s: int = 300  # start-up and collective timeout: a missing peer ends the job instead of hanging it

    prog = "python -m hpcbench.workloads.allreduce"
