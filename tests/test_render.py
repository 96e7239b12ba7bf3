from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import DATA, REPO

from hpcbench.plan.expand import expand
from hpcbench.plan.spec import load, parse
from hpcbench.rundir import PointPaths
from hpcbench.submit.render import render_job

GOLDEN = DATA / "golden"
RUN = Path("/scratch/runs/scaling-golden/points")
PYTHON = "/opt/hpcbench/bin/python"

MPIRUN_SWEEP = """
[sweep]
name = "quoting"
[slurm]
launcher = "mpirun"
partition = "cpu nodes"
account = "proj;rm -rf /"
modules = ["openmpi/4.1 ", "py$(whoami)"]
sbatch_args = ["--constraint=a100&ib"]
[slurm.env]
SAFE = "it's $HOME and `id`"
[workload]
model = "mnist_cnn"
[matrix]
nodes = [2]
ranks_per_node = [2]
"""


def _render(spec, point) -> str:
    return render_job(spec, point, PointPaths(RUN / point.dirname), PYTHON)


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("HPCBENCH_UPDATE_GOLDEN") and text != path.read_text():
        path.write_text(text)
        # Never a pass: an updated golden must be reviewed (git diff) and the test run again without the variable.
        pytest.fail(f"{name} rewritten; review `git diff {path}`, then rerun without HPCBENCH_UPDATE_GOLDEN")
    assert text == path.read_text(), f"{name} changed; review the diff, then rerun with HPCBENCH_UPDATE_GOLDEN=1"


def test_golden_srun_gpu_job_script():
    spec = load(REPO / "sweeps" / "scaling.toml")
    point = next(p for p in expand(spec) if (p.backend, p.nodes, p.ranks_per_node) == ("nccl", 2, 4))
    text = _render(spec, point)
    _check_golden("scaling_nccl_n2x4.sh", text)
    assert "#SBATCH --gpus-per-node=4" in text and "#SBATCH --ntasks-per-node=4" in text
    assert "export NCCL_DEBUG=INFO" in text
    # gpu_bind = "block" (the default): ranks in blocks per socket, so local rank i sits with GPU i.
    assert "srun --ntasks=8 --ntasks-per-node=4 --cpu-bind=sockets --distribution=block:block \\\n" in text


def _scaling_with(slurm_line: str):
    text = (REPO / "sweeps" / "scaling.toml").read_text().replace('cpu_bind = "sockets"',
                                                                  f'cpu_bind = "sockets"\n{slurm_line}')
    return parse(text, str(REPO / "sweeps" / "scaling.toml"))


def test_golden_srun_gpu_closest_job_script():
    """gpu_bind = "closest": Slurm gives each task one GPU, the closest to the task's own CPUs."""
    spec = _scaling_with('gpu_bind = "closest"')
    point = next(p for p in expand(spec) if (p.backend, p.nodes, p.ranks_per_node) == ("nccl", 2, 4))
    text = _render(spec, point)
    _check_golden("scaling_nccl_n2x4_closest.sh", text)
    assert "srun --ntasks=8 --ntasks-per-node=4 --cpu-bind=sockets --gpus-per-task=1 --gpu-bind=single:1 \\\n" in text
    assert "--distribution" not in text and "#SBATCH --gpus-per-node=4" in text
    # A scheduler setting: the point keeps its id.
    assert point.id == next(p for p in expand(load(REPO / "sweeps" / "scaling.toml")) if p.label == point.label).id


@pytest.mark.parametrize("launcher, gpu_bind, gpu_line, cpu_line", [
    ("srun", "block", "srun --ntasks=4 --ntasks-per-node=2 --cpu-bind=sockets --distribution=block:block",
     "srun --ntasks=4 --ntasks-per-node=2 --cpu-bind=sockets"),
    ("srun", "closest", "srun --ntasks=4 --ntasks-per-node=2 --cpu-bind=sockets --gpus-per-task=1 --gpu-bind=single:1",
     "srun --ntasks=4 --ntasks-per-node=2 --cpu-bind=sockets"),
    ("srun", "none", "srun --ntasks=4 --ntasks-per-node=2 --cpu-bind=sockets",
     "srun --ntasks=4 --ntasks-per-node=2 --cpu-bind=sockets"),
    ("mpirun", "block", "mpirun -np 4 --map-by socket --rank-by core --bind-to socket -x NCCL_DEBUG",
     "mpirun -np 4 --map-by socket --bind-to socket -x NCCL_DEBUG"),
    ("mpirun", "none", "mpirun -np 4 --map-by socket --bind-to socket -x NCCL_DEBUG",
     "mpirun -np 4 --map-by socket --bind-to socket -x NCCL_DEBUG"),
    ("horovodrun", "block", "--mpi-args '--map-by socket --rank-by core --bind-to socket'",
     "--mpi-args '--map-by socket --bind-to socket'"),
    ("torchrun", "block", "srun --ntasks=2 --ntasks-per-node=1 --cpu-bind=none /py -m torch.distributed.run",
     "srun --ntasks=2 --ntasks-per-node=1 --cpu-bind=none /py -m torch.distributed.run"),
])
def test_gpu_bind_reaches_gpu_points_only(tmp_path, launcher, gpu_bind, gpu_line, cpu_line):
    """Each launcher's line for a GPU point under each gpu_bind; the CPU point of the same sweep is unchanged."""
    base = f'[slurm]\nlauncher = "{launcher}"\ngpu_bind = "{gpu_bind}"\n'
    gpu = parse(base + '[workload]\ndevice = "cuda"\nbackend = "nccl"\n[matrix]\nnodes = [2]\ngpus_per_node = [2]\n',
                "g.toml")
    cpu = parse(base + "[matrix]\nnodes = [2]\nranks_per_node = [2]\n", "c.toml")
    [gp], [cp] = expand(gpu), expand(cpu)
    gtext, ctext = (render_job(s, p, PointPaths(tmp_path), "/py") for s, p in ((gpu, gp), (cpu, cp)))
    assert gpu_line in gtext, gtext
    assert cpu_line in ctext and "--rank-by" not in ctext and "--distribution" not in ctext and "--gpu" not in ctext
    subprocess.run(["bash", "-n"], input=gtext, text=True, check=True)


@pytest.mark.parametrize("launcher", ["mpirun", "horovodrun", "torchrun"])
def test_gpu_bind_closest_needs_srun(launcher):
    from hpcbench.errors import ConfigError

    body = f'[slurm]\nlauncher = "{launcher}"\ngpu_bind = "closest"\n[workload]\ndevice = "cuda"\nbackend = "nccl"\n'
    with pytest.raises(ConfigError, match=r"g.toml: slurm.gpu_bind: 'closest' is srun's --gpu-bind"):
        parse(body, "g.toml")
    parse(body.replace('device = "cuda"\nbackend = "nccl"', 'device = "cpu"'), "c.toml")  # no GPU: nothing to bind


def test_golden_mpirun_cpu_job_script_quotes_every_user_value():
    spec = parse(MPIRUN_SWEEP, "quoting.toml")
    [point] = expand(spec)
    text = _render(spec, point)
    _check_golden("quoting_mpirun_n2x2.sh", text)
    assert "mpirun -np 4 --map-by socket --bind-to socket" in text
    assert "gpus-per-node" not in text  # CPU points ask for no GPUs
    assert "#SBATCH --partition='cpu nodes'" in text


def test_rendered_values_survive_the_shell(tmp_path):
    """Run the script's export and module lines in bash: hostile values come out as written, nothing runs."""
    spec = parse(MPIRUN_SWEEP, "quoting.toml")
    [point] = expand(spec)
    text = _render(spec, point)
    lines = [l for l in text.splitlines() if l.startswith(("export SAFE=", "module load"))]
    script = "module() { printf '%s\\n' \"$@\" >> modules.txt; }\n" + "\n".join(lines) + '\nprintf "%s" "$SAFE"'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout == "it's $HOME and `id`"
    assert (tmp_path / "modules.txt").read_text().splitlines() == ["load", "openmpi/4.1 ", "load", "py$(whoami)"]


@pytest.mark.parametrize("golden", ["scaling_nccl_n2x4.sh", "scaling_nccl_n2x4_closest.sh", "quoting_mpirun_n2x2.sh"])
def test_golden_scripts_are_valid_bash(golden):
    subprocess.run(["bash", "-n", str(GOLDEN / golden)], check=True)


def test_sbatch_reads_the_quoted_directives_as_written(tmp_path, slurm_cluster):
    """A real (held, then cancelled) submission: Slurm sees the quoted values exactly as the user wrote them."""
    spec = parse(MPIRUN_SWEEP.replace('partition = "cpu nodes"', 'partition = "debug"')
                 .replace('account = "proj;rm -rf /"\n', "")
                 .replace('sbatch_args = ["--constraint=a100&ib"]', 'sbatch_args = ["--comment=x & \'y\'", "--hold"]'),
                 "quoting.toml")
    [point] = expand(spec)
    script = tmp_path / "job.sh"
    script.write_text(render_job(spec, point, PointPaths(tmp_path), PYTHON))
    job = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, check=True).stdout.strip()
    try:
        shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True, check=True).stdout
    finally:
        subprocess.run(["scancel", job], check=True)
    assert "JobName=hpcb-quoting-gloo-mnist_cnn-b32-n2x2" in shown
    assert "Comment=x & 'y'" in shown and "NumNodes=2" in shown and "Partition=debug" in shown


@pytest.mark.parametrize("launcher, expect", [
    ("srun", "srun --ntasks=4 --ntasks-per-node=2 --cpu-bind=sockets '--x=a b' \\\n"),
    ("mpirun", "mpirun -np 4 --map-by socket --bind-to socket -x NCCL_DEBUG '--x=a b' \\\n"),
    ("torchrun", "srun --ntasks=2 --ntasks-per-node=1 --cpu-bind=none '--x=a b' /py -m torch.distributed.run "),
    ("horovodrun", "--mpi-args '--map-by socket --bind-to socket' '--x=a b' \\\n"),
])
def test_launcher_args_and_prelude_with_every_launcher(tmp_path, launcher, expect):
    """issue 6's launcher_args reach each of issue 7's launchers, quoted; the prelude is plain lines before it."""
    spec = parse(f'[slurm]\nlauncher = "{launcher}"\nlauncher_args = ["--x=a b"]\n'
                 "[matrix]\nnodes = [2]\nranks_per_node = [2]\n", "l.toml")
    [point] = expand(spec)
    text = render_job(spec, point, PointPaths(tmp_path), "/py", "hpcbench:r:p")
    assert expect in text
    body = text.split(f"cd {tmp_path}\n", 1)[1]
    prelude = {"torchrun": "MASTER_ADDR=$(", "horovodrun": "HOSTS=$("}.get(launcher)
    if prelude:  # shell lines of their own, not continued into the launcher line
        assert body.startswith(prelude) and not body.splitlines()[0].endswith("\\"), body
    else:
        assert body.startswith(launcher), body
    assert "#SBATCH --comment=hpcbench:r:p\n" in text and "#SBATCH --no-requeue\n" in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
