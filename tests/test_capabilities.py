"""Capabilities are checked against what really imports in this venv, never against hard-coded answers."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

from conftest import REPO

from hpcbench import capabilities


def test_detect_matches_what_imports():
    import torch
    import torch.distributed as dist

    caps = capabilities.detect()
    assert caps.torch == torch.__version__
    assert caps.cuda_devices == torch.cuda.device_count()
    assert caps.dist_backends["gloo"] == dist.is_gloo_available()
    assert caps.dist_backends["mpi"] == dist.is_mpi_available()
    assert caps.dist_backends["nccl"] == dist.is_nccl_available()
    has_ccl = importlib.util.find_spec("oneccl_bindings_for_pytorch") is not None
    assert caps.dist_backends["ccl"] == has_ccl
    assert ("dist.ccl" in caps.reasons) == (not has_ccl)
    if not dist.is_mpi_available():
        assert "built without mpi" in caps.reasons["dist.mpi"]


def test_horovod_build_flags_match_horovod():
    import horovod.torch as hvd

    caps = capabilities.detect()
    assert caps.horovod == __import__("horovod").__version__
    assert caps.horovod_build["mpi_built"] == hvd.mpi_built()
    assert caps.horovod_build["gloo_built"] == hvd.gloo_built()
    assert caps.horovod_build["ccl_built"] == hvd.ccl_built()
    assert ("mpi" in caps.horovod_controllers) == bool(hvd.mpi_built())
    assert ("gloo" in caps.horovod_controllers) == bool(hvd.gloo_built())
    assert ("nccl" in caps.horovod_tensor_ops) == bool(hvd.nccl_built())


def test_unavailable_follows_the_installation():
    import horovod.torch as hvd
    import torch.distributed as dist

    caps = capabilities.detect()
    assert capabilities.unavailable("ddp", "gloo", "cpu", caps) is None
    assert (capabilities.unavailable("ddp", "mpi", "cpu", caps) is None) == dist.is_mpi_available()
    assert (capabilities.unavailable("horovod", "mpi", "cpu", caps) is None) == bool(hvd.mpi_built())
    assert (capabilities.unavailable("horovod", "gloo", "cpu", caps) is None) == bool(hvd.gloo_built())
    ccl = capabilities.unavailable("horovod", "oneccl", "cpu", caps)
    assert (ccl is None) == bool(hvd.ccl_built())
    assert "nccl" in capabilities.unavailable("ddp", "nccl", "cpu", caps)
    # Plan time on a login node: a GPU-less node must not reject a cuda point, run time must.
    if caps.cuda_version and caps.cuda_devices == 0:
        assert capabilities.unavailable("ddp", "gloo", "cuda", caps, devices=False) is None
        assert "no GPU" in capabilities.unavailable("ddp", "gloo", "cuda", caps)
    assert "unknown framework" in capabilities.unavailable("tensorflow", "gloo", "cpu", caps)


def test_missing_pieces_give_reasons_not_crashes():
    # Blocking an import in sys.modules makes it raise ImportError, as a missing install would.
    code = ("import sys; sys.modules['horovod'] = None; sys.modules['torchvision'] = None\n"
            "from hpcbench import capabilities as c\n"
            "caps = c.detect()\n"
            "print(caps.horovod, caps.torchvision, caps.torch is not None)\n"
            "print(caps.reasons['horovod']); print(c.unavailable('horovod', 'gloo', 'cpu', caps))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "None None True"
    assert lines[1].split(":")[0] in ("ImportError", "ModuleNotFoundError")
    assert lines[2].startswith("horovod is not importable")


def test_importing_capabilities_is_cheap():
    code = "import sys, hpcbench.capabilities; print('torch' in sys.modules, 'horovod' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False False"
