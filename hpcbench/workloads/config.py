"""Rank configs: one frozen dataclass per workload kind, written from the parameter declaration
(plan/fields.py) into workloads/_configs.py by ``python -m hpcbench.plan.codegen``, behind each
workload's command line (the CLI is a thin layer over them). Import them from here.

A kind's config has the point's folder, id and label (RankConfig), and every declared parameter that
applies to that kind and reaches the ranks, with the declared default. ``from_point`` -> ``to_argv``
-> ``from_argv`` is a round trip: what the planner decides is exactly what a rank runs with.
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from hpcbench.plan.fields import BY_NAME, rank_params
from hpcbench.vocab import KINDS

if TYPE_CHECKING:
    from hpcbench.plan.expand import Point

MODULE = {kind: f"hpcbench.workloads.{kind}" for kind in KINDS}  # what `python -m` runs for each kind


def _bool(text: str) -> bool:
    if text not in ("True", "False"):
        raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")
    return text == "True"


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


C = TypeVar("C", bound="RankConfig")


@dataclass(frozen=True)
class RankConfig:
    """Round trip Point -> argv -> config, for the config of any workload kind."""

    kind: ClassVar[str]
    out: str
    point_id: str
    label: str

    @classmethod
    def from_point(cls: type[C], point: Point, out: str, **overrides: Any) -> C:
        kw = {p.name: getattr(point, p.name) for p in rank_params(cls.kind)}
        kw.update(overrides)
        return cls(out=out, point_id=point.id, label=point.label, **kw)

    def params(self) -> dict[str, Any]:
        """The parameters this rank ran with (the record keeps them)."""
        return {p.name: getattr(self, p.name) for p in rank_params(self.kind)}

    def to_argv(self) -> list[str]:
        argv = ["--out", self.out, "--point-id", self.point_id, "--label", self.label]
        for p in rank_params(self.kind):
            value = getattr(self, p.name)
            if p.stated(value):
                argv += [_flag(p.name), str(value)]
        return argv

    @classmethod
    def from_argv(cls: type[C], argv: list[str] | None) -> C:
        ap = argparse.ArgumentParser(prog=f"python -m {MODULE[cls.kind]}",
                                     description=f"One rank of an hpcbench {cls.kind} point.")
        for f in fields(cls):
            p = BY_NAME.get(f.name)
            kind: Any = str if p is None else (_bool if p.type is bool else p.type)
            default: Any = f.default
            required = default is MISSING
            ap.add_argument(_flag(f.name), dest=f.name, type=kind, required=required,
                            help=p.doc if p else None, **({} if required else {"default": default}))
        return cls(**vars(ap.parse_args(argv)))


# The classes, one per kind, written by codegen; it imports RankConfig from above, so it comes last.
from hpcbench.workloads._configs import CONFIGS, AllreduceConfig, TrainConfig  # noqa: E402

__all__ = ["CONFIGS", "MODULE", "AllreduceConfig", "RankConfig", "TrainConfig", "rank_params"]
