"""What a Point does beside holding its fields (expand.py says what they are). The fields are written from
plan/fields.py into plan/_generated.py (``python -m hpcbench.plan.codegen``), whose Point inherits these.
"""

from __future__ import annotations

from dataclasses import fields, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from hpcbench.plan.axes import env_axes_var
from hpcbench.plan.fields import PARAMS
from hpcbench.vocab import RENAMED

if TYPE_CHECKING:  # the generated module imports this one
    from hpcbench.plan._generated import SlurmSettings

EXTRA = ("env", "slurm", "job")  # (name, value) pairs, sorted by name; plan.json writes them as tables
P = TypeVar("P", bound="PointMethods")


class PointMethods:
    id: str
    label: str
    nodes: int
    ranks_per_node: int
    env: tuple[tuple[str, str], ...]
    slurm: tuple[tuple[str, Any], ...]
    job: tuple[tuple[str, Any], ...]

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def dirname(self) -> str:
        return f"{self.label}-{self.id}"

    def params(self) -> dict[str, Any]:
        """Every declared parameter's value."""
        return {p.name: getattr(self, p.name) for p in PARAMS}

    def settings(self, base: SlurmSettings) -> SlurmSettings:
        """The [slurm] settings of this point's job: the sweep's ``base``, with its own axes' values, and its
        environment variables exported after [slurm.env]."""
        if not (self.env or self.slurm or self.job):
            return base
        return _settings(base, self.env, self.slurm, self.job)

    def to_dict(self) -> dict[str, Any]:
        # Flat fields only, so a shallow copy does (asdict deep-copies: 10x slower on 10,000 points).
        d = {name: getattr(self, name) for name in _names(type(self))[1]}
        d.update((name, dict(getattr(self, name))) for name in EXTRA if getattr(self, name))
        return d

    @classmethod
    def from_dict(cls: type[P], d: dict[str, Any]) -> P:
        """A point from plan.json; parameters that a run of an older hpcbench did not write take their default."""
        known = _names(cls)[0]
        kw = {k: v for k, v in d.items() if k in known}
        if kw.get("kind") in RENAMED:  # written under the kind's first name, which was then its model too
            kw.update(kind=RENAMED[kw["kind"]], model=None)
        kw.update((name, tuple(dict(kw[name]).items())) for name in EXTRA if name in kw)
        return cls(**kw)


# Once per class: to_dict runs once per point. A dict, not functools.cache: mypy does not take type[P] as Hashable.
_NAMES: dict[type, tuple[frozenset[str], tuple[str, ...]]] = {}


def _names(cls: type) -> tuple[frozenset[str], tuple[str, ...]]:
    """Every field's name, and the flat ones (not EXTRA) in order."""
    if cls not in _NAMES:
        names = tuple(f.name for f in fields(cls))
        _NAMES[cls] = frozenset(names), tuple(n for n in names if n not in EXTRA)
    return _NAMES[cls]


@lru_cache(maxsize=4096)  # a few distinct combinations, asked once per point
def _settings(base: SlurmSettings, env: tuple[tuple[str, str], ...], slurm: tuple[tuple[str, Any], ...],
              job: tuple[tuple[str, Any], ...]) -> SlurmSettings:
    exports = (*env, env_axes_var(env)) if env else ()
    return replace(base, env=(*base.env, *exports), **dict(slurm), **dict(job))
