"""One launch plan, three renderers: the job script, submitit and the local backend start the same ranks.

Each point is rendered by all three backends, nothing submitted. For every rank the test compares what it runs
and its environment. They are equal except where DIFFERENCES (and LOCAL_ONLY) name why; each case lists the
differences it shows, so an unnamed difference fails, and so does a named one that no longer occurs.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
from conftest import sbatch_wait

from hpcbench.errors import ConfigError
from hpcbench.plan.expand import expand
from hpcbench.plan.spec import parse
from hpcbench.rundir import PointPaths
from hpcbench.submit.backends.local import Here, local_starts
from hpcbench.submit.backends.submitit import SubmititBackend, executor_parameters
from hpcbench.submit.launch import LaunchPlan, Shell, gpu_srun_args, mpi_map_args, plan_launch
from hpcbench.submit.render import render_job
from hpcbench.workloads.distenv import from_environ

PY = "/opt/py/bin/python"

# Set by the local backend alone, with the value it must have there.
LOCAL_ONLY = {
    "HPCBENCH_JOB_ID": ("local7", "no Slurm job id on this machine: the backend names the job itself"),
    "MASTER_ADDR": ("127.0.0.1", "every rank is on this host, not on the first node of an allocation"),
    "MASTER_PORT": ("4242", "a port free on this host, not one derived from a Slurm job id"),
    "SLURM_JOB_NODELIST": ("thishost", "Slurm names the allocation's nodes; here the one node is this host"),
}
DIFFERENCES = {
    "local: inherits the caller's environment": "less the variables of other jobs and launchers (SLURM_*, OMPI_* "
    "but OMPI_MCA_*, RANK, MASTER_*); sbatch exports the submitter's environment too",
    "local: no launcher, no binding": "ranks start directly on one host whose cores they all share: no srun or "
    "mpirun words, no cpu or GPU binding",
    "local: one mpirun for MPI ranks": "Horovod's MPI controller needs an MPI launcher: mpirun -np N --oversubscribe "
    "--bind-to none starts every rank on this one host, and its OMPI_COMM_WORLD_* tell each its place; as root, "
    "OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) too, without which mpirun refuses to start. (So a point of several nodes has "
    "every rank on node 0 here: the case has one node.)",
    "local: srun's place variables": "under mpirun, horovodrun and torchrun the job's ranks learn their place from the "
    "launcher (OMPI_COMM_WORLD_*, RANK); local ranks from srun's SLURM_* variables; distenv reads the same place",
    "submitit: its own process runs the module": "each task runs submitit's python, which calls run_rank(module, "
    "argv), i.e. the module's main(argv), with SUBMITIT_EXECUTOR=slurm exported by submitit's script",
    "submitit: srun only": "submitit starts the ranks with its own srun line (task counts from sbatch), so it refuses "
    "launcher = mpirun, horovodrun and torchrun",
}
ALWAYS = {"local: inherits the caller's environment", "local: no launcher, no binding",
          "submitit: its own process runs the module"}
# The caller of the local backend: its own variables, and some of another job's and launcher's.
CALLER = {"PATH": os.environ["PATH"], "HOME": "/home/u", "OMPI_MCA_btl": "self,tcp", "SLURM_JOB_ID": "99",
          "SLURM_PROCID": "5", "OMPI_COMM_WORLD_RANK": "3", "RANK": "3", "MASTER_PORT": "1", "PMIX_RANK": "2"}
FOREIGN = ("SLURM_JOB_ID", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "RANK", "PMIX_RANK")
KEPT = ("PATH", "HOME", "OMPI_MCA_btl")
# Where a rank is, as srun, mpirun and torchrun say it.
PLACE = {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_NNODES",
         *(f"OMPI_COMM_WORLD_{k}" for k in ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "NODE_RANK")),
         "RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID"}

CPU = "[matrix]\nnodes = [2]\nranks_per_node = [2]\n"
GPU = '[workload]\ndevice = "cuda"\nbackend = "nccl"\n[matrix]\nnodes = [2]\ngpus_per_node = [2]\n'
HVD = "[workload]\nframework = \"horovod\"\nbackend = \"{}\"\n[matrix]\nnodes = [{}]\nranks_per_node = [2]\n"
PLACES = {"local: srun's place variables", "submitit: srun only"}
CASES = {
    "ddp-gloo-srun": ("[slurm]\ncpus_per_task = 2\n" + CPU, set()),
    "horovod-mpi-srun-pmix": (HVD.format("mpi", 1), {"local: one mpirun for MPI ranks"}),
    "horovod-gloo-srun": (HVD.format("gloo", 2), set()),
    "ddp-gloo-mpirun": ('[slurm]\nlauncher = "mpirun"\nlauncher_args = ["--tag-output"]\n' + CPU, PLACES),
    "horovodrun": ('[slurm]\nlauncher = "horovodrun"\n' + HVD.format("gloo", 2), PLACES),
    "torchrun": ('[slurm]\nlauncher = "torchrun"\n' + CPU, PLACES),
    "gpu-block": ('[slurm]\ngpu_bind = "block"\n' + GPU, set()),
    "gpu-closest": ('[slurm]\ngpu_bind = "closest"\nlauncher_args = ["--exact"]\n' + GPU, set()),
    "env-axes": ('[slurm]\nmodules = ["openmpi/4"]\n[slurm.env]\nSAFE = "it\'s $HOME"\nNCCL_PROTO = "Simple"\n'
                 '[matrix.env]\nNCCL_ALGO = ["Ring", "a b"]\n' + CPU, set()),
}


def job_script(text: str, plan: LaunchPlan) -> dict:
    """What the rendered job.sh says: its task layout, set-up lines, exported environment, prelude and words."""
    head, body = text.split("set -uo pipefail\n", 1)
    setup, launch = body.split(f"\ncd {shlex.quote(plan.workdir)}\n", 1)
    sbatch = dict(re.findall(r"^#SBATCH --([a-z-]+)=(\S+)$", head, re.MULTILINE))
    layout = (int(sbatch["nodes"]), int(sbatch["ntasks-per-node"]), int(sbatch["cpus-per-task"]))
    exports = [line for line in setup.splitlines() if line.startswith("export ")]
    names = [line[len("export "):].split("=", 1)[0] for line in exports]
    # As sbatch runs it: SLURM_CPUS_PER_TASK from the script's own #SBATCH line.
    script = "\n".join([*exports, "env -0"])
    out = subprocess.run(["env", "-i", f"SLURM_CPUS_PER_TASK={layout[2]}", "bash", "-c", script],
                         capture_output=True, text=True, check=True).stdout
    env = dict(kv.split("=", 1) for kv in out.split("\0") if kv)
    lines = launch.split("\nrc=$?\n")[0].split("\n")
    first = next(i for i, line in enumerate(lines) if line.endswith(" \\"))  # the launcher line, continued
    words = shlex.split("\n".join(lines[first:]).replace("\\\n", " "))
    start = max(i for i in range(len(words)) if words[i:i + 3] == [PY, "-u", "-m"])
    return {"layout": layout, "setup": [line for line in setup.splitlines() if line], "prelude": lines[:first],
            "env": {n: env[n] for n in names}, "launcher": words[:start], "rank_argv": words[start:]}


def launcher_places(job: dict, plan: LaunchPlan) -> list[dict[str, str]]:
    """Each rank's place, as the job's launcher and sbatch give it (rank r on node r // ranks per node)."""
    nodes, per, cpus = job["layout"]
    words = job["launcher"]
    opt = dict(w.split("=", 1) for w in words if w.startswith("--") and "=" in w)
    sbatch = {"SLURM_JOB_NUM_NODES": str(nodes), "SLURM_NTASKS_PER_NODE": str(per), "SLURM_CPUS_PER_TASK": str(cpus)}
    if words[0] == "srun" and "torch.distributed.run" not in words:
        n, p = int(opt["--ntasks"]), int(opt["--ntasks-per-node"])
        return [{**sbatch, "SLURM_NTASKS": str(n), "SLURM_NNODES": str(nodes), "SLURM_PROCID": str(r),
                 "SLURM_LOCALID": str(r % p), "SLURM_NODEID": str(r // p)} for r in range(n)]
    if words[0] == "srun":  # torchrun: one srun task per node, which starts the node's ranks
        p = int(opt["--nproc-per-node"])
        return [{**sbatch, "TORCHELASTIC_RUN_ID": "1", "RANK": str(r), "LOCAL_RANK": str(r % p),
                 "WORLD_SIZE": str(nodes * p), "GROUP_RANK": str(r // p)} for r in range(nodes * p)]
    n = int(words[words.index("-np") + 1])  # mpirun, or horovodrun's mpirun
    return [{**sbatch, "OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": str(n),
             "OMPI_COMM_WORLD_LOCAL_RANK": str(r % per), "OMPI_COMM_WORLD_LOCAL_SIZE": str(per),
             "OMPI_COMM_WORLD_NODE_RANK": str(r // per)} for r in range(n)]


def place(env: dict[str, str]) -> tuple[int, int, int, int, int]:
    d = from_environ({k: v for k, v in env.items() if k not in ("MASTER_ADDR", "SLURM_JOB_NODELIST")})
    return d.rank, d.local_rank, d.world_size, d.node_rank, d.nnodes


def check_submitit(spec, point, plan: LaunchPlan, job: dict, seen: set[str]) -> None:
    assert plan.srun_steps == (plan.settings.launcher == "srun")
    if plan.settings.launcher != "srun":
        with pytest.raises(ConfigError, match="cannot be used with --backend submitit"):
            SubmititBackend().check(spec)
        seen.add("submitit: srun only")
        return
    p = executor_parameters(spec, point, plan, "hpcbench:r:p")
    assert (p["nodes"], p["ntasks_per_node"], p["cpus_per_task"]) == job["layout"]
    assert p["setup"] == job["setup"]  # modules and exports, line for line
    # submitit's srun: no task counts (sbatch's), then exactly the job script's srun options, in order.
    srun = job["launcher"]
    assert srun[0] == "srun" and srun[1:3] == [f"--ntasks={job['layout'][0] * job['layout'][1]}",
                                               f"--ntasks-per-node={job['layout'][1]}"]
    assert p["srun_args"] == srun[3:]
    # submit() hands submitit plan.python, and run_rank plan.module and plan.rank_args: the job's rank command.
    assert [plan.python, "-u", "-m", plan.module, *plan.rank_args] == job["rank_argv"]
    seen.add("submitit: its own process runs the module")


def local_rank_envs(plan: LaunchPlan, job: dict, seen: set[str], tmp_path) -> list[dict[str, str]]:
    """What the local backend starts, checked against the job's rank command; each rank's environment."""
    here = Here(CALLER, "thishost", 4242, os.geteuid() == 0)
    starts = local_starts(plan, "local7", here)
    assert all(list(s.argv[-len(job["rank_argv"]):]) == job["rank_argv"] for s in starts)
    seen.add("local: no launcher, no binding")
    if len(starts) == plan.world_size:
        assert all(len(s.argv) == len(job["rank_argv"]) for s in starts)
        return [s.env for s in starts]
    [start] = starts  # one mpirun: run it for real, each rank printing its environment instead of the workload
    assert list(start.argv[:-len(job["rank_argv"])]) == ["mpirun", "-np", str(plan.world_size), "--oversubscribe",
                                                         "--bind-to", "none"]
    dump = (f"import json, os; open(os.path.join({str(tmp_path)!r}, 'env-' + os.environ['OMPI_COMM_WORLD_RANK']), "
            "'w').write(json.dumps(dict(os.environ)))")
    subprocess.run([*start.argv[:-len(job["rank_argv"])], sys.executable, "-c", dump], env=start.env,
                   capture_output=True, text=True, timeout=120, check=True)
    seen.add("local: one mpirun for MPI ranks")
    envs = [json.loads((tmp_path / f"env-{r}").read_text()) for r in range(plan.world_size)]
    root = {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"}
    assert all(all((env.pop(k, None) == "1") == here.root for k in root) for env in envs)
    return [{k: v for k, v in e.items() if k in start.env or k.startswith("OMPI_COMM_WORLD_")} for e in envs]


def check_local(plan: LaunchPlan, job: dict, seen: set[str], tmp_path) -> None:
    places = launcher_places(job, plan)
    for rank, env in enumerate(local_rank_envs(plan, job, seen, tmp_path)):
        for name, (value, _why) in LOCAL_ONLY.items():
            assert env.pop(name) == value, name
        assert all(env.get(name) != CALLER[name] for name in FOREIGN)
        assert all(env.pop(name) == CALLER[name] for name in KEPT)
        seen.add("local: inherits the caller's environment")
        want = {**job["env"], **places[rank]}
        if env != want:  # only the place variables may differ, and then only in name: the same place
            assert {k for k in env.keys() | want.keys() if env.get(k) != want.get(k)} <= PLACE, (env, want)
            assert place(env) == place(want), (env, want)
            seen.add("local: srun's place variables" if "SLURM_PROCID" in env else "local: one mpirun for MPI ranks")


def check_binding(point, plan: LaunchPlan, words: list[str]) -> None:
    """The launcher line binds as the point's settings say: srun's task counts, then its options (which job steps
    and submitit reuse) with the cpu and GPU binding; mpirun's mapping; torchrun's srun task left unbound."""
    s, w = plan.settings, plan.words
    if s.launcher == "srun":
        assert words[1:3] == list(w.srun_tasks) and words[3:3 + len(w.srun_options)] == list(w.srun_options)
        assert f"--cpu-bind={s.cpu_bind}" in w.srun_options and set(gpu_srun_args(point, s)) <= set(w.srun_options)
    elif s.launcher == "torchrun":
        assert words[:4] == ["srun", f"--ntasks={plan.nodes}", "--ntasks-per-node=1", "--cpu-bind=none"]
    else:  # mpirun, or horovodrun's
        mapping = " ".join(mpi_map_args(point, s))
        assert mapping in " ".join(words) and (not mapping or f"--bind-to {s.cpu_bind.rstrip('s')}" in mapping)


@pytest.mark.parametrize("case", CASES)
def test_every_backend_starts_the_plans_ranks(tmp_path, case):
    text, named = CASES[case]
    spec = parse(text, "l.toml")
    for point in expand(spec):
        check_point(spec, point, named, tmp_path / point.id)


def check_point(spec, point, named: set[str], tmp_path) -> None:
    tmp_path.mkdir()
    paths = PointPaths(tmp_path / point.dirname)
    plan = plan_launch(spec, point, str(paths.dir), PY)
    job = job_script(render_job(spec, point, paths, PY, "hpcbench:r:p"), plan)
    # The job script renders the plan: layout, environment in order, prelude, launcher words, rank command.
    assert job["layout"] == (plan.nodes, plan.ranks_per_node, plan.settings.cpus_per_task)
    assert list(job["env"].items()) == list(plan.job_environ().items())
    want = {"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": str(plan.settings.cpus_per_task), **dict(spec.slurm.env),
            **dict(point.env)}
    assert want.items() <= plan.job_environ().items()
    assert job["prelude"] == list(plan.words.prelude)
    assert job["launcher"] == [shlex.split(w)[0] if isinstance(w, Shell) else w for w in plan.words.argv]
    assert job["rank_argv"] == list(plan.rank_argv)
    check_binding(point, plan, job["launcher"])
    seen: set[str] = set()
    check_submitit(spec, point, plan, job, seen)
    check_local(plan, job, seen, tmp_path)
    expected = ALWAYS | named
    if "submitit: srun only" in named:  # then submitit runs nothing at all
        expected.discard("submitit: its own process runs the module")
    assert seen == expected and seen <= set(DIFFERENCES)


@pytest.mark.slurm
def test_srun_gives_each_task_the_plans_rank_environment(tmp_path, slurm_cluster):
    """The local backend's ranks get plan.rank_env; a real srun under sbatch, with the plan's own srun words and
    sbatch layout, gives each task the same SLURM_* variables."""
    spec = parse("[slurm]\ncpus_per_task = 1\n" + CPU, "l.toml")
    [point] = expand(spec)
    plan = plan_launch(spec, point, str(tmp_path), sys.executable)
    dump = (f"import json, os; open(os.path.join({str(tmp_path)!r}, 'env-' + os.environ['SLURM_PROCID']), 'w')"
            ".write(json.dumps(dict(os.environ)))")
    srun = shlex.join([*plan.words.argv, sys.executable, "-c", dump])
    proc = sbatch_wait(["--partition=debug", f"--nodes={plan.nodes}", f"--ntasks-per-node={plan.ranks_per_node}",
                        f"--cpus-per-task={plan.settings.cpus_per_task}", "--time=2", f"--output={tmp_path}/out",
                        f"--wrap={srun}"], timeout=300)
    assert proc.returncode == 0, proc.stderr + (tmp_path / "out").read_text()
    for rank in range(plan.world_size):
        env = json.loads((tmp_path / f"env-{rank}").read_text())
        slurm = {k: v for k, v in plan.rank_env(rank).items() if k.startswith("SLURM_")}
        assert {k: env.get(k) for k in slurm} == slurm, rank
