"""Render one job script per point from the Jinja2 template (StrictUndefined, every user value quoted)."""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from typing import Any

from hpcbench import __version__
from hpcbench.launch import launcher_argv, rank_argv
from hpcbench.plan import Point
from hpcbench.rundir import PointPaths
from hpcbench.spec import SweepSpec


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hpcbench", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["q"] = lambda v: shlex.quote(str(v))
    env.filters["join_q"] = lambda argv: " ".join(shlex.quote(str(a)) for a in argv)
    return env


def _argv_lines(argv: list[str]) -> list[str]:
    """``python -u -m module`` on one line, then one ``--flag value`` per line, for a readable script."""
    q = [shlex.quote(a) for a in argv]
    head = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    return [" ".join(q[:head])] + [" ".join(q[i:i + 2]) for i in range(head, len(q), 2)]


def sanitise_job_name(name: str) -> str:
    """Letters, digits, '.', '_' and '-' only, at most 100 characters: safe in squeue output, mail and shells."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100] or "hpcb"


def job_name(spec: SweepSpec, point: Point) -> str:
    return sanitise_job_name(f"hpcb-{spec.sweep.name}-{point.label}")


def render_job(spec: SweepSpec, point: Point, paths: PointPaths, python: str, comment: str | None = None) -> str:
    return _env().get_template("job.sh.j2").render(
        point=point,
        slurm=spec.slurm,
        sweep_name=spec.sweep.name,
        job_name=job_name(spec, point),
        comment=comment,
        paths=paths,
        version=__version__,
        launcher=launcher_argv(point, spec.slurm),
        rank_lines=_argv_lines(rank_argv(point, str(paths.dir), python)),
    )
