"""Rank configs: one dataclass per workload kind, derived from the parameter declaration
(plan/fields.py), behind each workload's command line (the CLI is a thin layer over them).

A kind's config has the point's folder, id and label, and every declared parameter that applies
to that kind and reaches the ranks, with the declared default. ``from_point`` -> ``to_argv`` ->
``from_argv`` is a round trip: what the planner decides is exactly what a rank runs with.
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING, field, fields, make_dataclass
from functools import cache
from typing import Any

from hpcbench.plan.fields import BY_NAME, PARAMS, Param
from hpcbench.vocab import KINDS

MODULE = {kind: f"hpcbench.workloads.{kind}" for kind in KINDS}  # what `python -m` runs for each kind


def _bool(text: str) -> bool:
    if text not in ("True", "False"):
        raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")
    return text == "True"


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


@cache  # once per kind: rendering 10,000 job scripts asks 10,000 times
def rank_params(kind: str) -> tuple[Param, ...]:
    """The declared parameters a rank of ``kind`` is given, in declaration order."""
    return tuple(p for p in PARAMS if p.applies(kind) and p.ranks)


class RankConfig:
    """Round trip Point -> argv -> config, for the config of any workload kind."""

    kind: str
    out: str
    point_id: str
    label: str

    @classmethod
    def from_point(cls, point: Any, out: str, **overrides: Any) -> Any:
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
    def from_argv(cls, argv: list[str] | None) -> Any:
        ap = argparse.ArgumentParser(prog=f"python -m {MODULE[cls.kind]}",
                                     description=f"One rank of an hpcbench {cls.kind} point.")
        for f in fields(cls):  # type: ignore[arg-type]
            p = BY_NAME.get(f.name)
            kind: Any = str if p is None else (_bool if p.type is bool else p.type)
            required = f.default is MISSING
            ap.add_argument(_flag(f.name), dest=f.name, type=kind, required=required,
                            help=p.doc if p else None, **({} if required else {"default": f.default}))
        return cls(**vars(ap.parse_args(argv)))


def _config(kind: str) -> type[RankConfig]:
    cls = make_dataclass(f"{kind.capitalize()}Config",
                         [("out", str), ("point_id", str), ("label", str),
                          *((p.name, p.annotation, field(default=p.default)) for p in rank_params(kind))],
                         bases=(RankConfig,), frozen=True, namespace={"kind": kind})
    cls.__module__ = __name__
    cls.__doc__ = f"What every rank of a {kind} point runs with."
    return cls


CONFIGS: dict[str, type[RankConfig]] = {kind: _config(kind) for kind in KINDS}
TrainConfig: Any = CONFIGS["train"]
CollectiveConfig: Any = CONFIGS["collective"]
