"""The backends: hpcbench's own (BUILTIN), and those of any installed package, found through the
``hpcbench.backends`` entry-point group. A site's package declares

    [options.entry_points]
    hpcbench.backends =
        mine = my_package.module:MyBackend

and ``--backend mine`` runs it. hpcbench's own are declared here rather than in its metadata, so that they are there
however hpcbench is found (an install whose metadata predates a backend, a checkout on PYTHONPATH); an installed
package cannot take their names. An entry point names a Backend class, or a function that returns a Backend
(``auto``). The name it is registered under is the backend's name: the ledger records it, and status and
cancel find each recorded job's backend by it. This is the one module that knows backends by name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from hpcbench.errors import ConfigError

if TYPE_CHECKING:  # imported when a backend is made, not by the CLI's parser (sweep --help stays quick)
    from importlib.metadata import EntryPoint

    from hpcbench.submit.backends.base import Backend

GROUP = "hpcbench.backends"
AUTO = "auto"


BUILTIN = {
    AUTO: "hpcbench.submit.registry:auto",
    "sbatch": "hpcbench.submit.backends.sbatch:SbatchBackend",
    "submitit": "hpcbench.submit.backends.submitit:SubmititBackend",
    "local": "hpcbench.submit.backends.local:LocalBackend",
}


@cache
def _entry_points() -> dict[str, EntryPoint]:
    from importlib.metadata import EntryPoint, entry_points

    found = {name: EntryPoint(name, value, GROUP) for name, value in BUILTIN.items()}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)  # the first on sys.path wins, as for any import
    return found


def names() -> list[str]:
    """Every registered backend, ``auto`` first."""
    return sorted(_entry_points(), key=lambda n: (n != AUTO, n))


def create(name: str, hold: bool = False) -> Backend:
    """A new backend by its registered name; ``hold``: queue its jobs held (sbatch --hold)."""
    from hpcbench.submit.backends.base import Backend

    ep = _entry_points().get(name)
    if ep is None:
        raise ConfigError(f"--backend: unknown backend {name!r} (choose from: {', '.join(names()) or 'none'})",
                          hint="a site's backend is installed as a package (pip install ...), which registers it")
    try:
        factory: Callable[[], Backend] = ep.load()
        backend = factory()
    except Exception as e:  # a site's package may fail any way while importing or building its backend
        raise ConfigError(f"backend {name!r} ({ep.value}) cannot be loaded: {type(e).__name__}: {e}",
                          hint="reinstall the package that provides it, or choose another --backend") from None
    if not isinstance(backend, Backend):
        raise ConfigError(f"backend {name!r} ({ep.value}) made a {type(backend).__name__}, not a Backend",
                          hint="its entry point must name a Backend subclass (hpcbench.submit.backends.base)")
    if not backend.name:  # a factory such as auto returns a backend already named
        backend.name = name
    if hold and not backend.holds:
        raise ConfigError(f"--hold needs a backend that can hold its jobs ({', '.join(able(lambda b: b.holds)) or 'none installed'}), "
                          f"not {backend.name!r}", hint=use(lambda b: b.holds, "add"))
    backend.hold = hold
    return backend


@cache
def known(name: str) -> Backend | None:
    """The backend a ledger names, to ask about or cancel its jobs; None where it is not installed here, or
    where its package is broken (said once on stderr: one bad site package must not stop every command)."""
    if name not in _entry_points() or name == AUTO:
        return None
    try:
        return create(name)
    except ConfigError as e:
        print(f"hpcbench: warning: {e}", file=sys.stderr)
        return None


def able(can: Callable[[Backend], bool]) -> list[str]:
    """The installed backends that can do something (``lambda b: b.packs``), for hints; ``auto`` left out."""
    return [n for n in names() if (b := known(n)) is not None and can(b)]


def use(can: Callable[[Backend], bool], verb: str = "run with") -> str | None:
    """A hint naming the first installed backend that can do it: ``run with --backend sbatch``; None where none can."""
    found = able(can)
    return f"{verb} --backend {found[0]}" if found else None


def auto() -> Backend:
    """``--backend auto``: of the installed backends that can run here, the one that ranks first (Slurm's
    sbatch where its commands are on PATH, else the local one)."""
    ranked = sorted((b for n in able(lambda b: b.auto_rank is not None) if (b := known(n)) is not None),
                    key=lambda b: -(b.auto_rank or 0))
    for b in ranked:
        if b.available():
            return create(b.name)
    raise ConfigError("--backend auto: no installed backend can run here", hint=f"choose one of: {', '.join(names())}")
