"""The explain rules, one group per module of this package: a module that defines ``RULES`` (functions of a
Context that return Findings) is found by its presence, so adding a rule is adding a module (or a function
to one), with no list to edit elsewhere.

A module may also say:
- ``ORDER`` (default 100): where its findings stand among findings of equal cost and severity (lower first);
- ``ON_LOGS_ALONE`` (default False): its rules also read a log that holds no measurement (NCCL lines only),
  where the other rules have nothing to read;
- ``EXPLAINS`` (default none): the causal table's entries of its rules, ``{cause rule: (symptom rules it can
  produce, ...)}``: where both are found on a point, the symptom is credited to the cause and shown under it
  (explain/causes.py). A new cause is one entry here;
- ``CAVEATS`` (default none): its rules whose findings say what the figures can bear (few repeats, noise), not what
  slows a point: they are listed after a point's causes and are never counted as one.
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
    explains: tuple[tuple[str, tuple[str, ...]], ...] = ()
    caveats: tuple[str, ...] = ()


def collect(package: str) -> list[Group]:
    """The rule groups of every module of ``package`` that defines RULES, by ORDER then module name."""
    paths: Sequence[str] = importlib.import_module(package).__path__
    found = []
    for info in pkgutil.iter_modules(paths, f"{package}."):
        module = importlib.import_module(info.name)
        rules = getattr(module, "RULES", None)
        if rules is not None:
            explains = getattr(module, "EXPLAINS", {})
            found.append(Group(info.name, tuple(rules), int(getattr(module, "ORDER", 100)),
                               bool(getattr(module, "ON_LOGS_ALONE", False)),
                               tuple((c, tuple(s)) for c, s in explains.items()),
                               tuple(getattr(module, "CAVEATS", ()))))
    return sorted(found, key=lambda g: (g.order, g.module))


@cache
def groups() -> tuple[Group, ...]:
    """This package's rule groups (found once per process)."""
    return tuple(collect(__name__))


@cache
def explains() -> dict[str, frozenset[str]]:
    """The causal table of every group, merged: cause rule -> the symptom rules it can produce."""
    out: dict[str, set[str]] = {}
    for g in groups():
        for cause, symptoms in g.explains:
            out.setdefault(cause, set()).update(symptoms)
    return {c: frozenset(s) for c, s in out.items()}


@cache
def caveats() -> frozenset[str]:
    """The rules of every group whose findings are caveats about the figures, not causes."""
    return frozenset(r for g in groups() for r in g.caveats)


def run(ctx: Context, logs_alone: bool = False) -> list[Finding]:
    """Every rule's findings about ``ctx``'s point, in group order (``logs_alone``: only the rules that read a
    log without a measurement)."""
    return [f for g in groups() if g.on_logs_alone or not logs_alone for rule in g.rules for f in rule(ctx)]
