"""A site's own hpcbench backend, shipped as a package: ``--backend bash`` runs each point's job script with
bash on this machine, one point after another, without sbatch.

What runs is exactly the job.sh a person reads. Inside an allocation (``salloc``) its srun line starts the
ranks on the allocated nodes; on a login node srun asks Slurm for an allocation of its own; with
``launcher = "mpirun"`` no scheduler is needed at all. The script writes the point's exit status, and its
output goes to the point's ``job-<id>.out``/``.err``, so status, summarize and resubmit treat these points as
any backend's. Install it (``pip install examples/backend-plugin``) and hpcbench lists it under --backend.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess

from hpcbench.files import atomic_write_text
from hpcbench.jobs import Job
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit.backends.base import Backend
from hpcbench.submit.launch import plan_launch

TIMED_OUT = 124  # what timeout(1) returns, and what the job's exit status file then says


class BashBackend(Backend):
    queued = False  # submit returns once the point is over: there is no queue to ask or cancel in

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> Job:
        job = self.job(f"bash{os.getpid()}-{next(self._ids)}", paths)
        env = {**os.environ, "HPCBENCH_JOB_ID": job.id}  # the ranks' records name their job by it
        limit = plan_launch(spec, point, str(paths.dir), python).time_limit_s  # the job script's own --time
        with open(paths.stdout(job.id), "ab") as out, open(paths.stderr(job.id), "ab") as err:
            # A session of its own, so that the time limit ends the launcher and its ranks with the script.
            script = subprocess.Popen(["bash", str(paths.job_script)], stdout=out, stderr=err, env=env,
                                      cwd=paths.dir, start_new_session=True)
            try:
                return job.ran(script.wait(timeout=limit))  # the script wrote its exit status itself
            except subprocess.TimeoutExpired:
                os.killpg(script.pid, signal.SIGKILL)
                script.wait()
                why = f"time limit of {limit:.0f} s reached, job script killed"
                err.write(f"hpcbench bash backend: {why}\n".encode())
                atomic_write_text(paths.exitcode, f"{TIMED_OUT}\n")
        return job.ran(TIMED_OUT, why)  # the ledger keeps it: status and summarize say TIMEOUT
