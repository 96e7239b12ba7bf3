"""Capabilities are checked against independent evidence: a process group that really starts (or
really refuses to), and Horovod's own `horovodrun --check-build`; never against the same calls
detect() makes itself."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from hpcbench.plan.limits import unavailable
from hpcbench.workloads import capabilities

pytestmark = pytest.mark.torch  # probes the real torch and Horovod

_INIT = """
import sys, datetime, torch.distributed as dist
try:
    dist.init_process_group({backend!r}, init_method="file://{store}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=20))
    dist.destroy_process_group()
    print("started")
except Exception as e:
    print("refused", type(e).__name__)
"""


def _starts(backend: str, tmp: Path) -> bool:
    """Whether a real one-rank process group of ``backend`` starts in a fresh interpreter."""
    code = _INIT.format(backend=backend, store=tmp / f"store-{backend}")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip().splitlines()[-1] == "started"


@pytest.mark.parametrize("backend", ["gloo", "mpi"])
def test_dist_backends_match_what_really_starts(backend, tmp_path):
    caps = capabilities.detect()
    assert caps.dist_backends[backend] == _starts(backend, tmp_path)
    # ...and the plan-time rule follows the same evidence
    assert (unavailable("ddp", backend, "cpu", caps) is None) == _starts(backend, tmp_path)


def _check_build() -> dict[str, bool]:
    """Horovod's own account of its build: `horovodrun --check-build`, '[X] NAME' for what is there."""
    horovodrun = shutil.which("horovodrun", path=str(Path(sys.executable).parent))
    assert horovodrun, "horovodrun is not installed beside this interpreter"
    out = subprocess.run([horovodrun, "--check-build"], capture_output=True, text=True, timeout=120, check=True).stdout
    return {m.group(2).lower(): m.group(1) == "X" for m in re.finditer(r"\[([ X])\] (\w+)", out)}


def test_horovod_build_matches_horovodrun_check_build():
    built = _check_build()
    caps = capabilities.detect()
    assert set(caps.horovod_controllers) == {c for c in ("mpi", "gloo") if built[c]}
    assert set(caps.horovod_tensor_ops) == {op for op in ("mpi", "gloo", "nccl", "ccl", "ddl") if built[op]}
    for backend, op in (("mpi", "mpi"), ("gloo", "gloo"), ("oneccl", "ccl")):
        assert (unavailable("horovod", backend, "cpu", caps) is None) == built[op], backend


def test_rules_that_do_not_depend_on_the_installation():
    caps = capabilities.detect()
    assert "nccl" in unavailable("ddp", "nccl", "cpu", caps)
    assert "unknown framework" in unavailable("tensorflow", "gloo", "cpu", caps)
    # Plan time on a login node must not reject a cuda point for want of a GPU; run time must.
    no_gpu = type(caps)(**{**caps.to_dict(), "cuda_version": "12.4", "cuda_devices": 0})
    assert unavailable("ddp", "gloo", "cuda", no_gpu, devices=False) is None
    assert "no GPU" in unavailable("ddp", "gloo", "cuda", no_gpu)
    no_cuda = type(caps)(**{**caps.to_dict(), "cuda_version": None})
    assert "built without CUDA" in unavailable("ddp", "gloo", "cuda", no_cuda, devices=False)


def test_missing_pieces_give_reasons_not_crashes():
    # Blocking an import in sys.modules makes it raise ImportError, as a missing install would.
    code = ("import sys; sys.modules['horovod'] = None; sys.modules['torchvision'] = None\n"
            "from hpcbench.workloads import capabilities as c\nfrom hpcbench.plan.limits import unavailable\n"
            "caps = c.detect()\n"
            "print(caps.horovod, caps.torchvision, caps.torch is not None)\n"
            "print(caps.reasons['horovod']); print(unavailable('horovod', 'gloo', 'cpu', caps))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "None None True"
    assert lines[1].split(":")[0] in ("ImportError", "ModuleNotFoundError")
    assert lines[2].startswith("horovod is not importable")


def test_importing_capabilities_is_cheap():
    code = "import sys, hpcbench.workloads.capabilities; print('torch' in sys.modules, 'horovod' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False False"
