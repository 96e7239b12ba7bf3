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
from hpcbench.spec import SlurmSettings, SweepSpec


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
    q = [_quote(a) for a in argv]
    head = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    return [" ".join(q[:head])] + [" ".join(q[i:i + 2]) for i in range(head, len(q), 2)]


def sanitise_job_name(name: str) -> str:
    """Letters, digits, '.', '_' and '-' only, at most 100 characters: safe in squeue output, mail and shells."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100] or "hpcb"


def job_name(spec: SweepSpec, point: Point) -> str:
    return sanitise_job_name(f"hpcb-{spec.sweep.name}-{point.label}")


# Rendering is two-level, for speed on sweeps of 10,000 points: Jinja renders the template once per
# sweep (and per GPU/comment variant) with a token in place of each per-point value; each point then
# only substitutes its own, already shell-quoted, values for the tokens. NUL never occurs in a sweep
# value (spec.py refuses it), so a token cannot be forged.
_TOKEN = re.compile("\x00([a-z_]+)\x00")
_POINT_KEYS = ("label", "id", "job_script", "job_name", "comment", "nodes", "ranks_per_node", "gpus_per_node",
               "stdout", "stderr", "dir", "launch", "exitcode")


@lru_cache(maxsize=8)
def _skeleton(slurm: SlurmSettings, sweep_name: str, has_gpus: bool, has_comment: bool) -> str:
    return _env().get_template("job.sh.j2").render(
        pt={k: f"\x00{k}\x00" for k in _POINT_KEYS}, slurm=slurm, sweep_name=sweep_name,
        version=__version__, has_gpus=has_gpus, has_comment=has_comment,
    )


# Most quoted words (flags, numbers, the interpreter) repeat from point to point.
_quote = lru_cache(maxsize=4096)(shlex.quote)


def point_values(spec: SweepSpec, point: Point, paths: PointPaths, python: str, comment: str | None) -> dict[str, str]:
    """Every per-point value of the job script, shell-quoted where a shell or sbatch will read it."""
    q = _quote
    launch = [" ".join(q(a) for a in launcher_argv(point, spec.slurm))]
    launch += ["    " + line for line in _argv_lines(rank_argv(point, str(paths.dir), python))]
    return {
        "label": point.label, "id": point.id, "job_script": q(str(paths.job_script)),
        "job_name": q(job_name(spec, point)), "comment": q(comment or ""), "nodes": str(point.nodes),
        "ranks_per_node": str(point.ranks_per_node), "gpus_per_node": str(point.gpus_per_node),
        "stdout": q(str(paths.stdout())), "stderr": q(str(paths.stderr())), "dir": q(str(paths.dir)),
        "launch": " \\\n".join(launch), "exitcode": q(str(paths.exitcode)),
    }


def render_job(spec: SweepSpec, point: Point, paths: PointPaths, python: str, comment: str | None = None) -> str:
    values = point_values(spec, point, paths, python, comment)
    return _TOKEN.sub(lambda m: values[m.group(1)], _skeleton(spec.slurm, spec.sweep.name, bool(point.gpus_per_node), bool(comment)))
