"""The explain rules, one group per module of this package: a module that defines ``RULES`` (functions of a
Context that return Findings) is found by its presence, so adding a rule is adding a module (or a function
to one), with no list to edit elsewhere.

A module may also say:
- ``ORDER`` (default 100): where its findings stand among findings of equal cost and severity (lower first);
- ``ON_LOGS_ALONE`` (default False): its rules also read a log that holds no measurement (NCCL lines only),
  where the other rules have nothing to read.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from hpcbench.explain.context import Context
from hpcbench.findings import Finding

Rule = Callable[[Context], list[Finding]]


@dataclass(frozen=True)
class Group:
    module: str
    rules: tuple[Rule, ...]
    order: int
    on_logs_alone: bool


def collect(package: str) -> list[Group]:
    """The rule groups of every module of ``package`` that defines RULES, by ORDER then module name."""
    paths: Sequence[str] = importlib.import_module(package).__path__
    found = []
    for info in pkgutil.iter_modules(paths, f"{package}."):
        module = importlib.import_module(info.name)
        rules = getattr(module, "RULES", None)
        if rules is not None:
            found.append(Group(info.name, tuple(rules), int(getattr(module, "ORDER", 100)),
                               bool(getattr(module, "ON_LOGS_ALONE", False))))
    return sorted(found, key=lambda g: (g.order, g.module))


@cache
def groups() -> tuple[Group, ...]:
    """This package's rule groups (found once per process)."""
    return tuple(collect(__name__))


def run(ctx: Context, logs_alone: bool = False) -> list[Finding]:
    """Every rule's findings about ``ctx``'s point, in group order (``logs_alone``: only the rules that read a
    log without a measurement)."""
    return [f for g in groups() if g.on_logs_alone or not logs_alone for rule in g.rules for f in rule(ctx)]
