"""Cluster profiles: shipped files, merging under the sweep's [slurm], limits refused at plan time."""
from __future__ import annotations

import subprocess

import pytest
from conftest import REPO, write

from hpcbench.plan.expand import expand
from hpcbench.plan.spec import load, parse
from hpcbench.rundir import PointPaths
from hpcbench.submit.render import render_job

CPU_SWEEP = """
cluster = "minicluster"
[workload]
steps = 2
warmup_steps = 1
[matrix]
nodes = [1, 2]
ranks_per_node = [1, 2]
"""


def _spec(tmp_path, text: str, name: str = "s.toml", cluster: str | None = None):
    # Beside a clusters/ folder, as a sweep in sweeps/ is: clusters/ is found one level up.
    path = write(tmp_path / "sweeps" / name, text)
    (tmp_path / "clusters").mkdir(exist_ok=True)
    for f in (REPO / "clusters").glob("*.toml"):
        (tmp_path / "clusters" / f.name).write_text(f.read_text())
    return load(path, cluster)


def test_minicluster_profile_fills_slurm_defaults(tmp_path):
    spec = _spec(tmp_path, CPU_SWEEP)
    s = spec.slurm
    assert spec.cluster is not None and spec.cluster.name == "minicluster"
    assert (s.partition, s.launcher, s.mpi, s.cpu_bind) == ("debug", "srun", "pmix", "cores")
    # module_use is relative to the profile file, so it names the modules/ beside clusters/.
    assert s.module_use == (str(tmp_path / "modules"),) and s.modules == ("hpcbench",)
    assert dict(s.env)["NCCL_SOCKET_IFNAME"] == "lo"


def test_sweep_keys_win_and_lists_are_appended(tmp_path):
    text = CPU_SWEEP + '[slurm]\npartition = "other"\nmodules = ["extra/1"]\n[slurm.env]\nNCCL_SOCKET_IFNAME = "eth0"\n'
    spec = _spec(tmp_path, text.replace("[workload]", "[workload]", 1))
    assert spec.slurm.partition == "other" and spec.slurm.mpi == "pmix"
    assert spec.slurm.modules == ("hpcbench", "extra/1")
    assert dict(spec.slurm.env) == {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "lo", "OMPI_MCA_btl": "^vader",
                                    "OMPI_MCA_mpi_yield_when_idle": "1"}


def test_inline_cluster_table(tmp_path):
    spec = parse('[cluster]\nname = "mine"\npartition = "p"\nqos = "high"\nmax_nodes = 1\n', str(tmp_path / "x.toml"))
    assert spec.cluster.name == "mine" and spec.slurm.qos == "high" and spec.cluster.max_nodes == 1


def test_example_gpu_profile_renders_site_syntax(tmp_path):
    spec = _spec(tmp_path, (REPO / "sweeps" / "scaling.toml").read_text(), "scaling.toml", cluster="example-gpu")
    point = next(p for p in expand(spec) if (p.backend, p.nodes, p.ranks_per_node) == ("nccl", 2, 8))
    text = render_job(spec, point, PointPaths(tmp_path / "pt"), "/opt/py/bin/python")
    assert "#SBATCH --gres=gpu:8" in text and "gpus-per-node" not in text
    assert "#SBATCH --qos=normal" in text and "#SBATCH --account=my-project" in text
    assert "srun --ntasks=16 --ntasks-per-node=8 --mpi=pmix --cpu-bind=sockets" in text
    assert f"module use {tmp_path / 'modules'}\n" in text
    # The site stack first, then the sweep's own list without repeating what the profile loads.
    loads = [line.split()[-1] for line in text.splitlines() if line.startswith("module load")]
    assert loads == ["cuda/12.4", "nccl/2.21", "openmpi/4.1", "hpcbench"]
    assert "export NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3" in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


@pytest.mark.parametrize("launcher, expect", [
    ("torchrun", ("srun --ntasks=2 --ntasks-per-node=1 --cpu-bind=none /py -m torch.distributed.run --nnodes=2 "
                  '--nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"')),
    ("horovodrun", 'horovodrun -np 4 -H "$HOSTS" --mpi --mpi-args \'--map-by socket --bind-to socket\''),
])
def test_other_launchers_render(tmp_path, launcher, expect):
    spec = parse(f'[slurm]\nlauncher = "{launcher}"\n[matrix]\nnodes = [2]\nranks_per_node = [2]\n', "l.toml")
    [point] = expand(spec)
    text = render_job(spec, point, PointPaths(tmp_path), "/py")
    assert expect in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_point_over_the_profile_is_refused_at_plan_time(cli, tmp_path):
    _spec(tmp_path, "")
    sweep = write(tmp_path / "sweeps" / "big.toml", CPU_SWEEP.replace("nodes = [1, 2]", "nodes = [1, 3]")
                  .replace("ranks_per_node = [1, 2]", "ranks_per_node = [2]") + '[slurm]\ncpus_per_task = 2\n')
    proc = cli("plan", str(sweep), "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert err.count("\n") == 0 and err.startswith(f"error: {sweep}: does not fit cluster 'minicluster'")
    assert "point gloo-mlp-b32-n3x2: nodes = 3 exceeds max_nodes = 2; ranks_per_node x cpus_per_task = 2 x 2 = 4 " \
           "exceeds max_cpus_per_node = 2" in err
    assert "point gloo-mlp-b32-n1x2: ranks_per_node x cpus_per_task" in err
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_time_and_gpu_limits(tmp_path):
    from hpcbench.plan.limits import violations

    spec = _spec(tmp_path, CPU_SWEEP + '[slurm]\ntime = "02:00:00"\n')
    assert violations(spec, expand(spec))[0] == "slurm.time = 02:00:00 exceeds max_time = 01:00:00"
    gpu = _spec(tmp_path, 'cluster = "minicluster"\n[workload]\ndevice = "cuda"\nbackend = "nccl"\n'
                '[matrix]\ngpus_per_node = [1]\n', "gpu.toml")
    assert violations(gpu, expand(gpu)) == [
        "point nccl-mlp-b32-n1x1: gpus_per_node = 1 but the cluster has no GPUs"]


def test_unknown_profile_names_the_known_ones(cli, tmp_path):
    _spec(tmp_path, "")
    sweep = write(tmp_path / "sweeps" / "x.toml", 'cluster = "nosuch"\n')
    proc = cli("plan", str(sweep), "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert "cluster profile 'nosuch' not found (known: example-gpu, minicluster)" in proc.stderr


def test_bad_profile_key_names_the_file(tmp_path):
    from hpcbench.errors import ConfigError

    write(tmp_path / "clusters" / "bad.toml", 'max_node = 3\n')
    with pytest.raises(ConfigError, match=r"bad.toml:.max_node: unknown key .*did you mean 'max_nodes'"):
        parse('cluster = "bad"\n', str(tmp_path / "s.toml"))


@pytest.mark.slurm
def test_job_loads_modules_on_local_slurm(cli, tmp_path, slurm_cluster):
    """A real job through the minicluster profile: `module use` + `module load hpcbench` put the venv first.

    The ranks' python is plain "python3" and PATH starts without the venv, so the job only finds
    torch if the module was loaded inside it; a module that does not exist fails the point with Lmod's reason.
    """
    import csv
    import os
    import sys

    prefix = os.path.dirname(os.path.dirname(sys.executable))
    env = {"HPCBENCH_PREFIX": prefix, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONPATH": ""}
    text = ('[slurm]\npython = "python3"\ntime = "00:05:00"\n'
            "[workload]\nsteps = 2\nwarmup_steps = 1\n[matrix]\nnodes = [2]\nranks_per_node = [1]\n")
    good = write(tmp_path / "sweeps" / "good.toml", text)
    proc = cli("sweep", str(good), "--cluster", str(REPO / "clusters" / "minicluster.toml"), "--backend", "sbatch",
               "--wait", "--poll", "1", "--run-dir", str(tmp_path / "good"), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = next((tmp_path / "good" / "points").glob("*/job.sh")).read_text()
    assert f"module use {REPO / 'modules'}\nmodule load hpcbench\n" in job
    [row] = list(csv.DictReader((tmp_path / "good" / "summary.csv").open()))
    assert row["state"] == "COMPLETED" and row["nodes_seen"] == "node1 node2", row

    bad = write(tmp_path / "sweeps" / "bad.toml", text.replace("[slurm]\n", '[slurm]\nmodules = ["nosuchmodule/9"]\n'))
    proc = cli("sweep", str(bad), "--backend", "sbatch", "--wait", "--poll", "1", "--run-dir", str(tmp_path / "bad"),
               env=env)
    assert proc.returncode == 1
    err = "".join(p.read_text() for p in (tmp_path / "bad" / "points").glob("*/job-*.err"))
    assert "nosuchmodule/9" in err and "unknown" in err, err


@pytest.mark.slurm
def _one_point_run(cli, sweep, run):
    """Sweep a one-point sweep on the local Slurm to its end: (the point's folder, its result record)."""
    import json

    proc = cli("sweep", str(sweep), "--backend", "sbatch", "--wait", "--poll", "1", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [point_dir] = (run / "points").iterdir()
    return point_dir, json.loads((point_dir / "result.json").read_text())


def test_torchrun_launcher_runs_on_local_slurm(cli, tmp_path, slurm_cluster):
    """launcher = "torchrun": one torchrun per node; ranks take their identity from torchrun, not srun."""
    sweep = write(tmp_path / "t.toml", '[slurm]\nlauncher = "torchrun"\ntime = "00:05:00"\n'
                  "[workload]\nsteps = 2\nwarmup_steps = 1\n[matrix]\nnodes = [2]\nranks_per_node = [2]\n")
    point_dir, rec = _one_point_run(cli, sweep, tmp_path / "run")
    assert "srun --ntasks=2 --ntasks-per-node=1 --cpu-bind=none" in (point_dir / "job.sh").read_text()
    # c10d rendezvous numbers the nodes in arrival order, so either node may hold ranks 0-1.
    by_node = {}
    for r in rec["ranks"]:
        by_node.setdefault(r["slurm_node"], []).append((r["local_rank"], r["rank"]))
    assert sorted(by_node) == ["node1", "node2"]
    for ranks in by_node.values():
        (l0, g0), (l1, g1) = sorted(ranks)
        assert (l0, l1) == (0, 1) and g1 == g0 + 1 and g0 in (0, 2)


@pytest.mark.slurm
def test_minicluster_profile_runs_horovod_mpi_two_ranks_on_each_node(cli, tmp_path, slurm_cluster):
    """The shipped profile alone (modules, pmix, binding, OpenMPI env) runs Horovod-mpi 2x2 on the local
    Slurm; without its OMPI_MCA_* lines this point hung until its time limit."""
    _spec(tmp_path, "")
    (tmp_path / "modules").symlink_to(REPO / "modules")  # the profile's module_use is ../modules
    sweep = write(tmp_path / "sweeps" / "h.toml", 'cluster = "minicluster"\n[slurm]\ntime = "00:03:00"\n'
                  '[workload]\nframework = "horovod"\nbackend = "mpi"\nmodel = "mnist_cnn"\nbatch_size = 8\n'
                  "steps = 4\nwarmup_steps = 1\n[matrix]\nnodes = [2]\nranks_per_node = [2]\n")
    point_dir, rec = _one_point_run(cli, sweep, tmp_path / "run")
    assert "export OMPI_MCA_btl='^vader'" in (point_dir / "job.sh").read_text()
    assert rec["world_size"] == 4 and sorted(r["slurm_node"] for r in rec["ranks"]) == ["node1"] * 2 + ["node2"] * 2
    # cpu_bind = "cores": the two ranks of a node each on a core of their own (with "sockets" both had CPUs 0-1)
    for node in ("node1", "node2"):
        a, b = (set(r["cpus"]) for r in rec["ranks"] if r["slurm_node"] == node)
        assert a and b and not a & b, rec["ranks"]


def test_example_gpu_limits(tmp_path):
    from hpcbench.plan.limits import violations

    spec = _spec(tmp_path, 'cluster = "example-gpu"\n[workload]\ndevice = "cuda"\nbackend = "nccl"\n'
                 "[matrix]\nnodes = [16, 32]\ngpus_per_node = [8, 16]\n")
    gpus = "gpus_per_node = 16 exceeds max_gpus_per_node = 8"
    cpus = "ranks_per_node x cpus_per_task = 16 x 8 = 128 exceeds max_cpus_per_node = 64"
    nodes = "nodes = 32 exceeds max_nodes = 16"
    assert violations(spec, expand(spec)) == [
        f"point nccl-mlp-b32-n16x16: {gpus}; {cpus}",
        f"point nccl-mlp-b32-n32x8: {nodes}",
        f"point nccl-mlp-b32-n32x16: {nodes}; {gpus}; {cpus}",
    ]


@pytest.mark.slurm
def test_resubmit_renders_with_the_profile_the_sweep_used(cli, tmp_path, slurm_cluster):
    """--cluster given to the sweep is remembered (cluster.txt): resubmit's re-rendered scripts keep its modules."""
    _spec(tmp_path, "")
    sweep = write(tmp_path / "sweeps" / "p.toml", "[workload]\nsteps = 2\n")
    profile = tmp_path / "clusters" / "minicluster.toml"
    proc = cli("plan", str(sweep), "--cluster", str(profile), "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "run" / "cluster.txt").read_text().strip() == str(profile.resolve())
    [script] = (tmp_path / "run" / "points").glob("*/job.sh")
    before = script.read_text()
    assert f"module use {tmp_path / 'modules'}\n" in before
    script.write_text("stale\n")
    # No point is UNKNOWN, so nothing is submitted; the scripts are rendered again all the same.
    proc = cli("resubmit", str(tmp_path / "run"), "--state", "UNKNOWN", "--backend", "sbatch")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert script.read_text() == before


@pytest.mark.slurm
def test_resubmit_resolves_an_inline_cluster_module_use_beside_the_original_sweep(cli, tmp_path, slurm_cluster):
    """The run keeps a copy of the sweep; a relative module_use in its inline [cluster] still means the
    folder beside the original file (sweep_path.txt), not the run directory."""
    sweep = write(tmp_path / "sweeps" / "inline.toml",
                  '[cluster]\nmodule_use = ["site-modules"]\n[slurm]\nmodules = ["hpcbench"]\n[workload]\nsteps = 2\n')
    run = tmp_path / "elsewhere" / "run"
    proc = cli("plan", str(sweep), "--run-dir", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [script] = run.glob("points/*/job.sh")
    want = f"module use {tmp_path / 'sweeps' / 'site-modules'}\n"
    before = script.read_text()
    assert want in before
    script.write_text("stale\n")
    proc = cli("resubmit", str(run), "--state", "UNKNOWN", "--backend", "sbatch")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert script.read_text() == before
