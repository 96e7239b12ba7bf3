"""modules/ under the real Lmod (Debian's lmod), in clean login shells as a user would type it."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO

from hpcbench import __version__

PREFIX = os.path.dirname(os.path.dirname(sys.executable))  # the venv running the tests


def login_shell(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``bash -lc`` with a bare environment: only what a fresh login gives, plus ``env``."""
    base = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin", "USER": "root", "LOGNAME": "root"}
    return subprocess.run(["bash", "-lc", script], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**base, **env}, check=False)


def test_module_load_hpcbench_in_a_clean_login_shell():
    proc = login_shell("module use modules && module load hpcbench && hpcbench --version && "
                       "python -c 'import hpcbench; print(hpcbench.__file__)'", HPCBENCH_PREFIX=PREFIX)
    assert proc.returncode == 0, proc.stderr
    version, where = proc.stdout.splitlines()
    assert version == f"hpcbench {__version__}"
    # The checkout holding modules/ comes first, whatever copy the venv was installed from.
    assert where == str(REPO / "hpcbench" / "__init__.py")


def test_module_without_an_install_says_which_variable_to_set(tmp_path):
    proc = login_shell("module use modules && module load hpcbench", HPCBENCH_PREFIX=str(tmp_path))
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())  # Lmod wraps its messages
    assert f"no bin/hpcbench under {tmp_path}" in err and "set HPCBENCH_PREFIX" in err


def test_stack_modules_follow_their_root_variables(tmp_path):
    # Debian's OpenMPI is under /usr: the variable is all a site changes.
    proc = login_shell("module use modules && module load openmpi/4.1 && echo $MPI_HOME && command -v mpirun",
                       HPCBENCH_OPENMPI_ROOT="/usr")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["/usr", "/usr/bin/mpirun"]
    # With no root given and none at the default place, loading fails and names the variable.
    for name, var in (("cuda/12.4", "HPCBENCH_CUDA_ROOT"), ("nccl/2.21", "HPCBENCH_NCCL_ROOT")):
        proc = login_shell(f"module use modules && module load {name}")
        assert proc.returncode != 0 and var in proc.stderr, (name, proc.stderr)
    # A CUDA root that exists: the toolkit's bin/ goes first on PATH.
    (tmp_path / "lib64").mkdir()
    proc = login_shell("module use modules && module load cuda/12.4 && echo $CUDA_HOME && echo $PATH",
                       HPCBENCH_CUDA_ROOT=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    home, path = proc.stdout.split()
    assert home == str(tmp_path) and path.startswith(f"{tmp_path}/bin:")


def test_module_avail_lists_the_shipped_modulefiles():
    proc = login_shell("module -t avail 2>&1 >/dev/null | sort", MODULEPATH=str(REPO / "modules"))
    names = [line for line in proc.stdout.split() if "/" in line and not line.startswith("/")]
    assert {"cuda/12.4", "hpcbench/0.1.0", "nccl/2.21", "openmpi/4.1"} <= set(names), proc.stdout
