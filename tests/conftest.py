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
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
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
