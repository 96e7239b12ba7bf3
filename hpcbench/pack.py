"""pack = true: many small points as ``srun`` steps inside one allocation of the largest node count.

Each point keeps its own folder, logs, exit status and result record, so status, summarize and
resubmit treat it as if it were a job of its own; the ledger names the shared job id and the pack.
One allocation instead of one per point saves the scheduler's queue wait and start-up per point.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hpcbench import __version__
from hpcbench.backends.base import Backend
from hpcbench.errors import ConfigError, SchedulerError
from hpcbench.launch import launcher_argv, rank_argv
from hpcbench.plan import Point
from hpcbench.render import _env, gpu_request, sanitise_job_name, setup_lines
from hpcbench.rundir import RunDir, atomic_write_text
from hpcbench.spec import SweepSpec, time_limit_seconds

if TYPE_CHECKING:
    from hpcbench.submission import Echo, SubmitReport


def _step_argv(spec: SweepSpec, rd: RunDir, p: Point, python: str) -> list[str]:
    paths = rd.point(p)
    srun = launcher_argv(p, spec.slurm, python)
    # A step uses only the nodes it needs; its output goes to the point's own folder, named by job id.
    srun[1:1] = [f"--nodes={p.nodes}", f"--output={paths.stdout()}", f"--error={paths.stderr()}"]
    return srun + rank_argv(p, str(paths.dir), python)


def _slurm_time(seconds: int) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return f"{minutes // 1440}-{minutes % 1440 // 60:02d}:{minutes % 60:02d}:00"


def render_pack(spec: SweepSpec, rd: RunDir, n: int, points: list[Point], python: str) -> str:
    if spec.slurm.launcher != "srun":
        raise ConfigError(f"{spec.path}: slurm.pack = true needs slurm.launcher = \"srun\" (job steps)",
                          hint="set pack = false to use mpirun")
    steps = [{"label": p.label, "id": p.id, "dir": rd.point(p).dir, "exitcode": rd.point(p).exitcode,
              "argv": _step_argv(spec, rd, p, python)} for p in points]
    # The steps run one after another, so the allocation needs the sum of their limits.
    total = time_limit_seconds(spec.slurm.time) * len(points)
    gpus = max(p.gpus_per_node for p in points)
    return _env().get_template("pack.sh.j2").render(
        n=n, sweep_name=spec.sweep.name, version=__version__, steps=steps, slurm=spec.slurm,
        script=rd.pack_script(n), stdout=rd.pack_stdout(n), comment=rd.job_comment(f"pack-{n}"),
        job_name=sanitise_job_name(f"hpcb-{spec.sweep.name}-pack-{n}"),
        nodes=max(p.nodes for p in points), ranks_per_node=max(p.ranks_per_node for p in points),
        gpus_per_node=gpus, gpu_request=gpu_request(spec.slurm, gpus), setup=setup_lines(spec.slurm),
        time=_slurm_time(total),
    )


def submit_pack(spec: SweepSpec, rd: RunDir, points: list[Point], python: str, backend: Backend,
                echo: Echo, report: SubmitReport) -> None:
    """Render and submit one pack of ``points``; record every point as submitted under the pack's job id."""
    from hpcbench import slurmcli

    if backend.name != "sbatch":
        raise ConfigError(f"slurm.pack = true needs --backend sbatch, not {backend.name!r}")
    rd.packs_root.mkdir(parents=True, exist_ok=True)
    n = len(list(rd.packs_root.glob("pack-*.sh"))) + 1
    script = rd.pack_script(n)
    atomic_write_text(script, render_pack(spec, rd, n, points, python))
    script.chmod(0o755)
    name = f"pack-{n}"
    for p in points:
        rd.record("submitting", p.id, backend=backend.name, pack=name)
    try:
        job_id = slurmcli.sbatch(script, getattr(backend, "extra", ()))
    except SchedulerError as e:
        for p in points:
            rd.record("submit_failed", p.id, backend=backend.name, pack=name, reason=str(e))
        echo(f"  {name} ({len(points)} points): NOT submitted: {e}")
        report.failed += len(points)
        return
    for p in points:
        rd.record("submitted", p.id, job_id=job_id, backend=backend.name, pack=name)
    echo(f"  {name}: job {job_id} runs {len(points)} points as job steps")
    report.submitted += len(points)
    report.allocations += 1
    report.packs += 1
    report.packed_points += len(points)
