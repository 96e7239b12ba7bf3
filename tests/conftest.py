from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

if TYPE_CHECKING:
    from hpcbench.jobs import SchedulerView

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"

# Hypothesis keeps its example database and constants cache in ./.hypothesis by default: tests write
# only under tmp paths.
set_hypothesis_home_dir(tempfile.mkdtemp(prefix="hpcbench-hypothesis-"))
settings.register_profile("hpcbench", database=None)
settings.load_profile("hpcbench")
# Every summarize records into the history database: the session's goes to a tmp file, never the user's
# $XDG_DATA_HOME (Slurm jobs and CLI subprocesses inherit it).
os.environ["HPCBENCH_HISTORY"] = str(Path(tempfile.mkdtemp(prefix="hpcbench-history-")) / "history.sqlite")


def _repository_files() -> set[str]:
    """Untracked and ignored entries of the checkout, bytecode aside (git status collapses new folders)."""
    out = subprocess.run(["git", "status", "--porcelain", "--ignored=matching"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    return {line[3:] for line in out.splitlines() if line[:2] in ("??", "!!") and "__pycache__" not in line}


@pytest.fixture(scope="session", autouse=True)
def nothing_written_into_the_repository():
    """Tests write only under tmp paths: anything new in the checkout after the session is an error."""
    before = _repository_files()
    yield
    new = sorted(_repository_files() - before)
    assert not new, f"the tests wrote into the repository: {new[:10]}"


@pytest.fixture(autouse=True)
def close_figures():
    """Tests that look at a plot keep its figure; pyplot holds every one until closed, so each test's are closed
    after it (pyplot is not imported here for tests that draw nothing)."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


def run_cli(*args: str, cwd: Path | None = None, module: str = "hpcbench", timeout: float = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run hpcbench as a user would, in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, check=False, text=True,
                          cwd=cwd or REPO, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture
def cli():
    return run_cli


def sbatch_wait(argv: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess[str]:
    """``sbatch --wait ARGV`` as a user runs it, but looking at the job every half second: sbatch's own wait looks
    after 2, 4, 8, 16 and then every 32 s, so a 7 s job held its test for 30 s. returncode: the job's exit code
    (sbatch --wait's), 1 where it ended without one (cancelled, timed out, node failure)."""
    sub = subprocess.run(["sbatch", "--parsable", *argv], capture_output=True, text=True, check=False, timeout=60,
                         **kw)
    if sub.returncode != 0:
        return sub
    job = sub.stdout.strip().split(";")[0]
    env = kw.get("env")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, check=False,
                               env=env).stdout
        state = re.search(r"\bJobState=(\S+)", shown)
        if state and state.group(1) not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED"):
            done = state.group(1) == "COMPLETED"
            code = re.search(r"\bExitCode=(\d+):(\d+)", shown)
            rc = 0 if done else (int(code.group(1)) if code else 0) or 1
            return subprocess.CompletedProcess(sub.args, rc, sub.stdout, sub.stderr + ("" if done else shown))
        time.sleep(0.5)
    raise subprocess.TimeoutExpired(sub.args, timeout)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the local Slurm carries the slurm marker, so `-m "not slurm"` never runs one by mistake."""
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slurm") is None:
            item.add_marker(pytest.mark.slurm)


@pytest.fixture(scope="session")
def slurm_cluster() -> Path:
    """The local Slurm of namespaced nodes (node1, node2), in $HPCBENCH_MINICLUSTER_DIR or the default folder; its
    folder. Started (idempotently) rather than skipped: a missing cluster is a failure. Every Slurm command of the
    session (and of the sweeps it starts) talks to this cluster (SLURM_CONF); in a folder other than the default,
    sweeps naming "minicluster" get the profile written there, which names that cluster's links file."""
    proc = run_cli("minicluster", "up", timeout=120)
    assert proc.returncode == 0, f"hpcbench minicluster up failed:\n{proc.stdout}\n{proc.stderr}"
    folder = Path(os.environ.get("HPCBENCH_MINICLUSTER_DIR", "/var/tmp/hpcbench-minicluster")).resolve()
    os.environ["SLURM_CONF"] = str(folder / "slurm.conf")
    if str(folder) != "/var/tmp/hpcbench-minicluster":
        os.environ["HPCBENCH_CLUSTER_PATH"] = str(folder)
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return folder


def queue(states: dict[str, str]) -> SchedulerView:
    """A scheduler's view that says only each job's state: {job id: Slurm state}."""
    from hpcbench.jobs import Job, SchedulerView

    return SchedulerView({j: Job(j, "", state=s) for j, s in states.items()})


@pytest.fixture
def worker_spans(monkeypatch):
    """Chunks small enough that a test file is cut into worker spans, read by one job; ``workers(n)`` then gives
    the parse n jobs and returns the list that says, per span of each later read, whether a worker read it."""
    from hpcbench.parse import parallel, scan

    monkeypatch.setattr(scan, "CHUNK", 256 << 10)  # a worker's span holds 4 chunks
    monkeypatch.setattr(scan, "FAST_MIN", 64 << 10)
    monkeypatch.setattr(scan, "PARALLEL_MIN", 0)
    monkeypatch.setenv(parallel.JOBS_ENV, "1")

    def workers(n: int) -> list[bool]:
        spans: list[bool] = []
        real = parallel.extracted

        def spy(*a, **k):
            for span, parts in real(*a, **k):
                spans.append(parts is not None)
                yield span, parts

        monkeypatch.setattr(parallel, "extracted", spy)
        monkeypatch.setenv(parallel.JOBS_ENV, str(n))
        return spans

    return workers


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
