from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


def run_cli(*args: str, cwd: Path | None = None, module: str = "hpcbench", timeout: float = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run hpcbench as a user would, in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, check=False, text=True,
                          cwd=cwd or REPO, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """The local 2-node Slurm. Started (idempotently) rather than skipped: a missing cluster is a failure."""
    proc = run_cli("minicluster", "up", timeout=120)
    assert proc.returncode == 0, f"hpcbench minicluster up failed:\n{proc.stdout}\n{proc.stderr}"
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# The matrix rows and exclude of "every CPU backend this installation has": DDP-gloo, Horovod-mpi, Horovod-gloo
# (PyPI's torch has no MPI process group). Put them under [matrix], with nodes/ranks_per_node.
CPU_BACKENDS = 'framework = ["horovod", "ddp"]\nbackend = ["mpi", "gloo"]\n'
NO_DDP_MPI = '[[exclude]]\nframework = "ddp"\nbackend = "mpi"\n'


def sweep_ok(cli, sweep: Path, run: Path, backend: str = "sbatch"):
    """Run a sweep to its end and return its RunDir; fail with the sweep's output if it did not succeed."""
    from hpcbench.rundir import RunDir

    proc = cli("sweep", str(sweep), "--backend", backend, "--wait", "--poll", "1", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return RunDir.open(run)
