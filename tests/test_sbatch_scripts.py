"""The ready scripts in sbatch/: shellcheck-clean, documented, and really run on the local Slurm in CPU mode."""
from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, sbatch_wait

SCRIPTS = sorted((REPO / "sbatch").glob("*.sh"))
# nccl-tests' all_reduce_perf row: size count type redop root, then time algbw busbw #wrong twice.
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)"
                 r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")


def test_shellcheck_clean():
    exe = shutil.which("shellcheck")
    assert exe, "shellcheck is not installed (apt-get install shellcheck; it is in scripts/test.sh APT_PACKAGES)"
    files = [str(p.relative_to(REPO)) for p in [*SCRIPTS, *sorted((REPO / "scripts").glob("*.sh"))]]
    proc = subprocess.run([exe, "-x", *files], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("script", [p for p in SCRIPTS if p.name != "lib.sh"], ids=lambda p: p.name)
def test_every_script_says_what_it_measures_and_what_to_edit(script):
    head = script.read_text().split("set -uo pipefail")[0]
    assert "Measures:" in head and "Edit for your site:" in head and "CPU only:" in head and "Output:" in head
    assert re.search(r"^#SBATCH --nodes=\d+$", head, re.MULTILINE)
    assert re.search(r"^#SBATCH --gpus-per-node=\d+$", head, re.MULTILINE)  # written for GPU sites


def sbatch(tmp_path, script: str, *opts: str, home: bool = True, **env: str) -> tuple[str, Path]:
    """``sbatch --wait`` (conftest.sbatch_wait) from a scratch submit folder, CPU settings from the environment; (log text, run dir)."""
    runs = tmp_path / "runs"
    # As a user would: `module load hpcbench` (from this checkout's modules/) puts the venv's python3 first.
    full = {**os.environ, "RUNS_ROOT": str(runs), "HPCBENCH_DEVICE": "cpu", "MODULE_USE": str(REPO / "modules"),
            "MODULES": "hpcbench", "HPCBENCH_PREFIX": os.path.dirname(os.path.dirname(sys.executable)),
            "HPCBENCH_HOME": str(REPO), **env}
    full.pop("PYTHON", None)
    if not home:  # found from the script's own submitted path instead
        full.pop("HPCBENCH_HOME")
    # Without HPCBENCH_HOME, submitted by a path relative to the submit folder, as `sbatch ../x/sbatch/s.sh`.
    path = str(REPO / "sbatch" / script) if home else os.path.relpath(REPO / "sbatch" / script, tmp_path)
    proc = sbatch_wait(["--gpus-per-node=0", "--cpus-per-task=1", "--time=5", *opts, path], cwd=tmp_path, env=full)
    job = proc.stdout.strip().split(";")[0]
    name = script[:-3]
    run_dir = runs / f"{name}-{job}"
    log = (run_dir / f"{name}.log").read_text() if (run_dir / f"{name}.log").exists() else "(no log)"
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}\n--- log:\n{log[-4000:]}"
    # The Slurm output file in the submit folder points at the log.
    assert f"log in {run_dir / name}.log" in (tmp_path / f"{name}-{job}.out").read_text()
    return log, run_dir


@pytest.mark.slurm
def test_nccl_2node_falls_back_to_hpcbench_allreduce_and_prints_the_table(tmp_path, slurm_cluster, cli):
    log, run_dir = sbatch(tmp_path, "nccl_2node.sh", "--ntasks-per-node=1", MAX_BYTES="64K", ITERS="3",
                          WARMUP_ITERS="1", NCCL_TESTS_DIR=str(tmp_path / "none"))
    assert "# FALLBACK: all_reduce_perf not found" in log and "running hpcbench's allreduce benchmark instead" in log
    rows = [m.groups() for line in log.splitlines() if (m := ROW.match(line))]
    sizes = [int(r[0]) for r in rows]
    assert sizes[0] == 8 and sizes[-1] == 64 * 1024 and all(b == 2 * a for a, b in itertools.pairwise(sizes)), sizes
    # busbw has two decimals, so the smallest sizes may show 0.00; the largest must move data. No wrong elements.
    assert float(rows[-1][7]) > 0 and all(r[8] == "0" and r[12] == "0" for r in rows), rows
    assert re.search(r"^# Avg bus bandwidth\s*:\s*[\d.]+", log, re.MULTILINE)
    assert re.search(r"^#\s+Rank\s+0 ", log, re.MULTILINE) and re.search(r"^#\s+Rank\s+1 ", log, re.MULTILINE)
    assert "# modules: hpcbench/0.1.0" in log
    # What a user does next: summarize the script's folder. Its allreduce table holds every size of the log.
    proc = cli("summarize", str(run_dir), "--out", str(tmp_path / "report"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    table = md.split("## Allreduce", 1)[1].split("\n## ", 1)[0]
    assert "no allreduce" not in table
    cells = re.findall(r"^\| (\d+ (?:B|KiB|MiB|GiB)) +\| ([\d.]+(?:e-?\d+)?) \(([\d.]+(?:e-?\d+)?)\)", table, re.MULTILINE)
    assert len(cells) == len(sizes) and cells[0][0] == "8 B" and cells[-1][0] == "64 KiB", table
    # One column: the table the log prints is the record's own, read once (the record's busbw is in-place's).
    assert "nccl-tests" not in table.splitlines()[2], table
    assert float(cells[-1][1]) == pytest.approx(float(rows[-1][11]), abs=0.01), (cells[-1], rows[-1])


@pytest.mark.slurm
@pytest.mark.parametrize("backend, nodes, per_node, home", [("gloo", 1, 2, False), ("mpi", 2, 1, True)])
def test_horovod_mnist_on_cpu(tmp_path, slurm_cluster, backend, nodes, per_node, home):
    """home=False: submitted from another folder with no HPCBENCH_HOME; lib.sh is found beside the script."""
    _, run_dir = sbatch(tmp_path, "horovod_mnist.sh", f"--nodes={nodes}", f"--ntasks-per-node={per_node}",
                        home=home, BACKEND=backend, BATCH_SIZE="8", STEPS="3", WARMUP_STEPS="1")
    rec = json.loads((run_dir / "result.json").read_text())
    assert rec["framework"] == "horovod" and rec["backend"] == backend and rec["world_size"] == nodes * per_node
    assert rec["throughput"] > 0
    assert len({r["slurm_node"] for r in rec["ranks"]}) == nodes  # a 1-node job may get either node


@pytest.mark.slurm
def test_ddp_cifar10_2node_on_cpu(tmp_path, slurm_cluster):
    log, run_dir = sbatch(tmp_path, "ddp_cifar10_2node.sh", DATA="synthetic", GPUS_PER_NODE="1", BATCH_SIZE="4",
                          STEPS="2", WARMUP_STEPS="1")
    assert "torch.distributed.run --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d" in log
    rec = json.loads((run_dir / "result.json").read_text())
    assert rec["model"] == "cifar_resnet18" and rec["backend"] == "gloo" and rec["throughput"] > 0
    # One rank per node, numbered by torchrun's rendezvous (either node may be rank 0), local rank 0 on both.
    assert sorted(r["slurm_node"] for r in rec["ranks"]) == ["node1", "node2"]
    assert sorted((r["rank"], r["local_rank"]) for r in rec["ranks"]) == [(0, 0), (1, 0)]


def test_a_script_without_its_lib_says_what_to_set(tmp_path):
    alone = tmp_path / "nccl_2node.sh"
    alone.write_text((REPO / "sbatch" / "nccl_2node.sh").read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("HPCBENCH_HOME", "SLURM_JOB_ID")}
    proc = subprocess.run(["bash", str(alone)], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "lib.sh not found; set HPCBENCH_HOME" in proc.stderr, proc.stderr
    assert "unbound variable" not in proc.stderr
