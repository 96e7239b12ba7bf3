"""What every workload kind's rank config does beside holding its fields: the round trip
``from_point`` -> ``to_argv`` -> ``from_argv``, so that what the planner decides is exactly what a rank
runs with. The per-kind classes (workloads/_configs.py) are written from plan/fields.py by
``python -m hpcbench.plan.codegen`` and inherit RankConfig; import them from workloads/config.py.
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
