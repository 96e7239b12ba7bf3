"""Render one job script per point from the Jinja2 template (StrictUndefined, every user value quoted)."""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from typing import Any

from hpcbench import __version__
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SlurmSettings, SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit.launch import EnvVar, LaunchPlan, Shell, plan_launch

# Batch shells are not login shells: the module command may be missing. The init files are not
# written for `set -u`, hence the +u around them.
MODULE_INIT = (
    "if ! type module >/dev/null 2>&1; then",
    "    for f in /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash /etc/profile.d/modules.sh; do",
    '        if [ -r "$f" ]; then set +u; . "$f"; set -u; break; fi',
    "    done",
    "fi",
)


# Most quoted words (flags, numbers, the interpreter) repeat from point to point.
_quote = lru_cache(maxsize=4096)(shlex.quote)


def _q(v: object) -> str:
    """Shell-quotes a value; a Shell word (hpcbench's own ``"$HOSTS"``) stays as the job's shell must see it."""
    return v if isinstance(v, Shell) else _quote(str(v))


def setup_lines(slurm: SlurmSettings, env: tuple[EnvVar, ...]) -> list[str]:
    """The job's set-up, shared by the sbatch template, the pack script and submitit: modules, then the launch
    plan's environment as exports."""
    lines: list[str] = []
    if slurm.modules or slurm.module_use:
        lines += [*MODULE_INIT, "set -e  # a module that does not load must stop the job before it runs in the wrong environment"]
        lines += [f"module use {_q(d)}" for d in slurm.module_use]
        lines += [f"module load {_q(m)}" for m in slurm.modules]
        lines += ["set +e", ""]
    lines += [f"export {v.name}={_q(v.shell or v.value)}" for v in env]
    return lines


def gpu_request(slurm: SlurmSettings, gpus: int) -> str:
    """The sbatch option that asks for the GPUs, in the site's gres syntax when its profile gives one."""
    return f"--gres={slurm.gres.format(gpus=gpus)}" if slurm.gres else f"--gpus-per-node={gpus}"


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hpcbench.submit", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["q"] = _q
    env.filters["join_q"] = lambda argv: " ".join(_q(a) for a in argv)
    return env


def template(name: str) -> Any:
    """A template of submit/templates/ (job.sh.j2, pack.sh.j2) in the environment every script is rendered with."""
    return _env().get_template(name)


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
_POINT_KEYS = ("label", "id", "job_script", "job_name", "comment", "nodes", "ranks_per_node", "gpu_request",
               "stdout", "stderr", "dir", "launch", "exitcode")


# Keyed by the point's own settings: a sweep whose axes include [slurm] keys or environment variables has
# one skeleton per distinct combination of those (a handful), never one per point.
@lru_cache(maxsize=256)
def _skeleton(slurm: SlurmSettings, env: tuple[EnvVar, ...], sweep_name: str, has_gpus: bool, has_comment: bool) -> str:
    return template("job.sh.j2").render(
        pt={k: f"\x00{k}\x00" for k in _POINT_KEYS}, slurm=slurm, sweep_name=sweep_name,
        version=__version__, has_gpus=has_gpus, has_comment=has_comment, setup=setup_lines(slurm, env),
    )


def launch_lines(plan: LaunchPlan) -> str:
    """The plan's prelude (hpcbench's own shell, one line each), then its launcher and rank command as one line,
    continued: ``python -u -m module`` after the launcher, then one ``--flag value`` per line."""
    launch = [" ".join(_q(a) for a in plan.words.argv)]
    launch += ["    " + line for line in _argv_lines(list(plan.rank_argv))]
    return "\n".join([*plan.words.prelude, " \\\n".join(launch)])


def point_values(spec: SweepSpec, point: Point, paths: PointPaths, plan: LaunchPlan, comment: str | None
                 ) -> dict[str, str]:
    """Every per-point value of the job script, shell-quoted where a shell or sbatch will read it."""
    q = _quote
    d = str(paths.dir)  # joined as text: pathlib costs ~10 us a join, 60,000 joins on 10,000 points
    return {
        "label": point.label, "id": point.id, "job_script": q(f"{d}/{PointPaths.JOB_SCRIPT}"),
        "job_name": q(job_name(spec, point)), "comment": q(comment or ""), "nodes": str(plan.nodes),
        "ranks_per_node": str(plan.ranks_per_node), "gpu_request": q(gpu_request(plan.settings, plan.gpus_per_node)),
        "stdout": q(f"{d}/{PointPaths.stdout_name()}"), "stderr": q(f"{d}/{PointPaths.stderr_name()}"),
        "dir": q(plan.workdir), "launch": launch_lines(plan), "exitcode": q(f"{d}/{PointPaths.EXITCODE}"),
    }


def render_job(spec: SweepSpec, point: Point, paths: PointPaths, python: str, comment: str | None = None) -> str:
    """The point's job script: its launch plan, with the plan's settings (the sweep's [slurm] and its axes' values)."""
    plan = plan_launch(spec, point, str(paths.dir), python)
    values = point_values(spec, point, paths, plan, comment)
    return _TOKEN.sub(lambda m: values[m.group(1)], _skeleton(plan.settings, plan.env, spec.sweep.name,
                                                              bool(plan.gpus_per_node), bool(comment)))
