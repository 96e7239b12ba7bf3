"""hpcbench doctor on the real minicluster: every finding is checked against the real command's own output."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import write

PREFIX = os.path.dirname(os.path.dirname(sys.executable))


def sh(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=60)


@pytest.mark.slurm
def test_doctor_reports_the_minicluster(cli, tmp_path, slurm_cluster):
    # Other jobs may hold the nodes for a while: give the probe job time.
    proc = cli("doctor", "--cluster", "minicluster", "--runs-root", str(tmp_path / "runs"), "--json",
               "--timeout", "400", env={"HPCBENCH_PREFIX": PREFIX})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = {}
    for f in json.loads(proc.stdout):
        found.setdefault(f["rule"], f)

    sacct = sh("sacct", "--noheader", "-X")
    if sacct.returncode != 0:  # the minicluster runs without slurmdbd
        said = (sacct.stdout + sacct.stderr).strip().splitlines()[-1]
        assert found["accounting"]["severity"] == "warning" and said in found["accounting"]["claim"]
    else:
        assert found["accounting"]["severity"] == "ok"

    listed = sh("srun", "--mpi=list").stdout + sh("srun", "--mpi=list").stderr
    plugins = re.findall(r"^\s+(\w+)\s*$", listed, re.MULTILINE)
    assert "pmix" in plugins
    assert found["srun --mpi"]["severity"] == "ok"
    assert all(p in found["srun --mpi"]["claim"] for p in plugins), (plugins, found["srun --mpi"])

    lmod = sh("bash", "-lc", "module --version 2>&1")
    version = re.search(r"Version (\S+)", lmod.stdout).group(1)
    assert found["modules"]["claim"].startswith(f"Lmod {version}")
    assert found["profile modules"]["severity"] == "ok"

    nodes = sh("scontrol", "show", "hostnames", sh("sinfo", "-h", "-p", "debug", "-o", "%N").stdout.strip())
    assert found["run directory"]["severity"] == "ok"
    assert f"visible from compute nodes {', '.join(nodes.stdout.split()[:2])}" in found["run directory"]["claim"]

    import torch.distributed as dist

    assert ("gloo" in found["torch"]["claim"].split("backends: ")[1].split(";")[0]) == dist.is_gloo_available()
    assert not list((tmp_path / "runs").iterdir())  # the probe cleans up after itself


def test_doctor_without_slurm_says_what_is_missing(cli, tmp_path):
    # A PATH with the shell and the filesystem tools but none of Slurm's commands.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "findmnt", "stat"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(bin_dir), "HPCBENCH_PREFIX": PREFIX}
    proc = cli("doctor", "--runs-root", str(tmp_path), "--no-job", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error    slurm: not on PATH: sbatch, squeue, srun, scontrol, sinfo" in proc.stdout
    assert "fix: run on a Slurm login node" in proc.stdout
    # The heuristic names the real filesystem type of the folder.
    fstype = sh("findmnt", "-n", "-o", "FSTYPE", "-T", str(tmp_path)).stdout.split()[0]
    assert f"run directory: {tmp_path} is on {fstype}" in proc.stdout
    assert proc.stdout.rstrip().endswith("1 required item(s) missing")
    assert re.search(r"ok +log scanner: C scanner built \(_scan\.", proc.stdout)
    off = cli("doctor", "--runs-root", str(tmp_path), "--no-job", env={**env, "HPCBENCH_PARSE_C": "0"})
    assert ("warning  log scanner: switched off by HPCBENCH_PARSE_C=0; the pure-Python engine reads the logs (the same "
            "facts; big logs about 3x slower)\n           fix: unset HPCBENCH_PARSE_C") in off.stdout, off.stdout


@pytest.mark.slurm
def test_doctor_refuses_a_profile_the_cluster_cannot_honour(cli, tmp_path, slurm_cluster):
    profile = write(tmp_path / "bad.toml", 'partition = "nopart"\nmpi = "nosuch"\nmodules = ["nosuchmod/1"]\n')
    proc = cli("doctor", "--cluster", str(profile), "--runs-root", str(tmp_path / "runs"), "--no-job")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "error    srun --mpi: profile asks for --mpi=nosuch; srun offers: pmix" in out
    assert "error    partition: partition 'nopart' is not known to sinfo" in out and "use one of: debug" in out
    assert re.search(r"error    profile modules: module load failed: .*nosuchmod/1", out)
    assert out.rstrip().endswith("3 required item(s) missing")
