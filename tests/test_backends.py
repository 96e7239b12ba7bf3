"""Backends: the built-ins (submit/registry.py) and a site's package, installed with pip, found through the
hpcbench.backends entry points."""
from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, write

from hpcbench.errors import ConfigError
from hpcbench.rundir import RunDir
from hpcbench.submit import registry

PLUGIN = REPO / "examples" / "backend-plugin"
# sweeps/local.toml's points, started by the job script's own launcher line (mpirun: no scheduler needed).
SWEEP = """[sweep]
name = "plugin"
[slurm]
time = "00:05:00"
cpus_per_task = 1
launcher = "mpirun"
[workload]
framework = "ddp"
model = "mlp"
device = "cpu"
batch_size = 64
steps = 5
warmup_steps = 1
[matrix]
backend = ["gloo"]
nodes = [1]
ranks_per_node = [1, 2]
"""


def test_builtin_backends_are_registered_with_their_flags():
    assert registry.names() == ["auto", "local", "sbatch", "submitit"]
    sbatch, local, submitit = (registry.create(n) for n in ("sbatch", "local", "submitit"))
    assert (sbatch.name, sbatch.queued, sbatch.packs, sbatch.holds, sbatch.concurrent_submit) == \
        ("sbatch", True, True, True, True)
    assert (local.name, local.queued, local.packs, local.holds) == ("local", False, False, False)
    assert (submitit.queued, submitit.packs, submitit.auto_rank) == (True, False, None)


def test_an_unknown_backend_is_refused_with_the_registered_names(cli, tmp_path):
    sweep = write(tmp_path / "s.toml", "[workload]\nsteps = 2\n")
    proc = cli("sweep", str(sweep), "--backend", "nope", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and not (tmp_path / "r").exists()
    assert "unknown backend 'nope' (choose from: auto, local, sbatch, submitit)" in proc.stderr
    with pytest.raises(ConfigError, match=r"unknown backend 'nope' \(choose from: auto, local, sbatch, submitit\)"):
        registry.create("nope")
    with pytest.raises(ConfigError, match=r"--hold needs a backend that can hold its jobs \(sbatch\), not 'local'"):
        registry.create("local", hold=True)


@pytest.fixture
def plugin_site(tmp_path):
    """The example package, pip-installed into a folder of its own (put on PYTHONPATH): the build's files land
    in a copy of its source, the install under tmp_path, nothing in the checkout or the venv."""
    src, site = tmp_path / "plugin-src", tmp_path / "site"
    shutil.copytree(PLUGIN, src)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(src)], check=True, capture_output=True, text=True, cwd=tmp_path)
    return site


@pytest.mark.torch  # runs the real workload
def test_a_backend_installed_as_a_package_runs_a_sweep(cli, tmp_path, plugin_site):
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(plugin_site), os.environ.get("PYTHONPATH", "")]),
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    sweep, run = write(tmp_path / "plugin.toml", SWEEP), tmp_path / "run"
    proc = cli("sweep", str(sweep), "--backend", "bash", "--wait", "--run-dir", str(run), env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "submitting with backend bash:" in proc.stdout
    rows = list(csv.DictReader((run / "summary.csv").open()))
    assert [(r["ranks_per_node"], r["state"]) for r in rows] == [("1", "COMPLETED"), ("2", "COMPLETED")]
    rd = RunDir.open(run)
    subs = rd.submissions()
    assert {s["backend"] for s in subs.values()} == {"bash"}
    for p in rd.points():  # the job script ran as written: its launcher, its exit status, the job's own logs
        job = subs[p.id]["job_id"]
        assert rd.point(p).exitcode.read_text() == "0\n" and rd.point(p).stdout(job).exists()
        assert f'"job_id": "{job}"' in rd.point(p).result.read_text()
    # status needs no queue for it; without the package installed it still reads the run from the ledger
    status = cli("status", str(run))
    assert status.returncode == 0 and "2 points: 2 COMPLETED" in status.stdout, status.stdout + status.stderr
    listed = cli("sweep", str(sweep), "--backend", "nope", "--run-dir", str(tmp_path / "r"), env=env)
    assert "(choose from: auto, bash, local, sbatch, submitit)" in listed.stderr, listed.stderr


# A site package whose entry point names a module that is not there (a half-removed install).
BROKEN = {"METADATA": "Metadata-Version: 2.1\nName: broken-backend\nVersion: 0.1\n",
          "entry_points.txt": "[hpcbench.backends]\nbroken = no_such_pkg.mod:Backend\n"}
PROBE = """
from hpcbench.errors import ConfigError
from hpcbench.submit import registry
print("auto:", registry.auto().name in registry.names())
print("holds:", registry.able(lambda b: b.holds))
print("known:", registry.known("broken"), registry.known("broken"))
try:
    registry.create("broken")
except ConfigError as e:
    print("create:", e)
"""


def test_a_broken_backend_package_is_skipped_unless_named(tmp_path):
    """auto, --hold's hint, status and cancel ask every backend or the ledger's: a bad site package warns once,
    and fails only a command that names it."""
    info = tmp_path / "site" / "broken_backend-0.1.dist-info"
    info.mkdir(parents=True)
    for name, text in BROKEN.items():
        (info / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(info.parent)])}
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[:3] == ["auto: True", "holds: ['sbatch']", "known: None None"]
    assert re.fullmatch(r"create: backend 'broken' \(no_such_pkg.mod:Backend\) cannot be loaded: "
                        r"ModuleNotFoundError: No module named 'no_such_pkg'", out[3])
    warned = [line for line in proc.stderr.splitlines() if "'broken'" in line]
    assert len(warned) == 1 and warned[0].startswith("hpcbench: warning: backend 'broken'"), proc.stderr


def test_resubmitting_a_run_whose_backend_is_not_installed_says_so(cli, tmp_path):
    """The run's own backend is the default of resubmit: where it is not installed, the error names it and what to do,
    instead of an unknown --backend the user never gave."""
    sweep = write(tmp_path / "s.toml", SWEEP)
    assert cli("plan", str(sweep), "--run-dir", str(tmp_path / "run")).returncode == 0
    rd = RunDir.open(tmp_path / "run")
    for p in rd.points():
        rd.record("submitted", p.id, job_id=f"x-{p.id}", backend="gone")
    proc = cli("resubmit", str(rd.root), "--state", "MISSING,UNKNOWN,FAILED")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{rd.root} was submitted with backend 'gone', which is not installed here" in proc.stderr
    assert "give --backend (one of: auto, local, sbatch, submitit)" in proc.stderr
