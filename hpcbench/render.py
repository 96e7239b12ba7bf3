"""Render one job script per point from the Jinja2 template (StrictUndefined, every user value quoted)."""

from __future__ import annotations

import shlex
from functools import lru_cache
from typing import Any

from hpcbench import __version__
from hpcbench.launch import Shell, launcher_argv, launcher_prelude, rank_argv
from hpcbench.plan import Point
from hpcbench.rundir import PointPaths
from hpcbench.spec import SlurmSettings, SweepSpec

# Batch shells are not login shells: the module command may be missing. The init files are not
# written for `set -u`, hence the +u around them.
MODULE_INIT = (
    "if ! type module >/dev/null 2>&1; then",
    "    for f in /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash /etc/profile.d/modules.sh; do",
    '        if [ -r "$f" ]; then set +u; . "$f"; set -u; break; fi',
    "    done",
    "fi",
)


def _q(v: object) -> str:
    return v if isinstance(v, Shell) else shlex.quote(str(v))


def setup_lines(slurm: SlurmSettings) -> list[str]:
    """The job's environment set-up, shared by the sbatch template and submitit: modules, then exports."""
    lines: list[str] = []
    if slurm.modules or slurm.module_use:
        lines += [*MODULE_INIT, "set -e  # a module that does not load must stop the job before it runs in the wrong environment"]
        lines += [f"module use {_q(d)}" for d in slurm.module_use]
        lines += [f"module load {_q(m)}" for m in slurm.modules]
        lines += ["set +e", ""]
    lines += ["export NCCL_DEBUG=INFO", 'export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"']
    lines += [f"export {k}={_q(v)}" for k, v in slurm.env]
    return lines


def gpu_request(slurm: SlurmSettings, gpus: int) -> str:
    """The sbatch option that asks for the GPUs, in the site's gres syntax when its profile gives one."""
    return f"--gres={slurm.gres.format(gpus=gpus)}" if slurm.gres else f"--gpus-per-node={gpus}"


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
    env.filters["q"] = _q
    env.filters["join_q"] = lambda argv: " ".join(_q(a) for a in argv)
    return env


def _argv_lines(argv: list[str]) -> list[str]:
    """``python -u -m module`` on one line, then one ``--flag value`` per line, for a readable script."""
    q = [shlex.quote(a) for a in argv]
    head = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    return [" ".join(q[:head])] + [" ".join(q[i:i + 2]) for i in range(head, len(q), 2)]


def job_name(spec: SweepSpec, point: Point) -> str:
    return f"hpcb-{spec.sweep.name}-{point.label}"


def render_job(spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> str:
    return _env().get_template("job.sh.j2").render(
        point=point,
        slurm=spec.slurm,
        sweep_name=spec.sweep.name,
        job_name=job_name(spec, point),
        paths=paths,
        version=__version__,
        setup=setup_lines(spec.slurm),
        gpu_request=gpu_request(spec.slurm, point.gpus_per_node),
        prelude=launcher_prelude(point, spec.slurm, python),
        launcher=launcher_argv(point, spec.slurm, python),
        rank_lines=_argv_lines(rank_argv(point, str(paths.dir), python)),
    )
