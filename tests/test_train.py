"""Training workloads: CI math, plan-time rejections, the real MNIST/CIFAR-10 loaders on files in the
real formats, and Horovod (MPI and Gloo controllers) and DDP-Gloo on the real 2-node Slurm."""
from __future__ import annotations

import csv
import json
import pickle
import struct
from pathlib import Path

import pytest
from conftest import CPU_BACKENDS, NO_DDP_MPI, sweep_ok, write

from hpcbench.rundir import RunDir
from hpcbench.stats import mean_ci95, t975
from hpcbench.vocab import MODELS

pytestmark = pytest.mark.torch  # runs the real torch workload (or probes torch)


def test_ci95_by_hand():
    # [1..5]: mean 3, s = sqrt(2.5) = 1.5811, se = s / sqrt(5) = 0.70711, t(0.975, 4) = 2.776.
    m, hw = mean_ci95([1.0, 2.0, 3.0, 4.0, 5.0])
    assert m == 3.0 and hw == pytest.approx(2.776 * 0.707107, rel=1e-5)
    assert mean_ci95([2.0]) == (2.0, None)
    # Beyond the table: t(0.975, 40) = 2.021, t(60) = 2.000, t(120) = 1.980 (standard tables).
    assert t975(40) == pytest.approx(2.021, abs=1e-3)
    assert t975(60) == pytest.approx(2.000, abs=1e-3)
    assert t975(120) == pytest.approx(1.980, abs=1e-3)
    assert t975(30) > t975(31) > t975(1000) > 1.96


@pytest.mark.parametrize("body, message", [
    ("[matrix]\nframework = ['none']\nranks_per_node = [2]\n",
     "framework 'none' is one process with no communication, but this point has 2 ranks"),
    ("[workload]\nscaling = 'strong'\nglobal_batch_size = 64\n[matrix]\nranks_per_node = [1, 3]\n",
     "global_batch_size 64 does not split evenly over 3 ranks"),
    ("[workload]\nscaling = 'strong'\n", "workload.global_batch_size: scaling = \"strong\" needs global_batch_size"),
    ("[workload]\ndata = 'mnist'\nmodel = 'mnist_cnn'\n", "workload.data_dir: data = 'mnist' reads a folder"),
    ("[workload]\ndata = 'cifar10'\ndata_dir = '/d'\nmodel = 'mnist_cnn'\n",
     "model 'mnist_cnn' does not take cifar10 samples (3, 32, 32) (models that do: cifar_resnet18)"),
])
def test_plan_time_rejections(cli, tmp_path, body, message):
    proc = cli("plan", str(write(tmp_path / "bad.toml", body)), "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_strong_scaling_splits_the_global_batch(cli, tmp_path):
    sweep = write(tmp_path / "s.toml", "[workload]\nscaling = 'strong'\nglobal_batch_size = 64\n"
                  "[matrix]\nframework = ['horovod', 'none']\nranks_per_node = [1, 2]\n"
                  "[[exclude]]\nframework = 'none'\nranks_per_node = 2\n")
    assert cli("plan", str(sweep), "--run-dir", str(tmp_path / "r")).returncode == 0
    pts = {(p.framework, p.world_size): p for p in RunDir.open(tmp_path / "r").points()}
    assert sorted(pts) == [("horovod", 1), ("horovod", 2), ("none", 1)]
    assert pts["horovod", 2].batch_size == 32 and pts["horovod", 1].batch_size == 64
    assert pts["none", 1].backend == "none" and pts["horovod", 2].label == "hvd-gloo-mlp-b32-n1x2"
    job = RunDir.open(tmp_path / "r").point(pts["horovod", 2]).job_script.read_text()
    assert "--scaling strong" in job and "--global-batch-size 64" in job and "--mpi=pmix" not in job


# --- real data formats, written here, read by torchvision's own datasets ----------------------------

def write_mnist(root: Path, n_train: int = 64, n_test: int = 16) -> None:
    """The IDX files of yann.lecun.com, uncompressed, in torchvision's MNIST/raw layout."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        pixels = bytes((i * 7 + j) % 256 for i in range(n) for j in range(28 * 28))
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 0x803, n, 28, 28) + pixels)
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))


def write_cifar10(root: Path, per_batch: int = 8) -> None:
    """The python pickle batches of cifar-10-python.tar.gz: data (N, 3072) uint8, labels, batches.meta."""
    import numpy as np

    base = root / "cifar-10-batches-py"
    base.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"batch_label": name, "data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 "labels": [int(x) for x in rng.integers(0, 10, per_batch)]}
        (base / name).write_bytes(pickle.dumps(batch, protocol=2))
    (base / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"c{i}" for i in range(10)]}, protocol=2))


def test_real_loaders_read_generated_files(tmp_path):
    from hpcbench.workloads.data import dataset

    write_mnist(tmp_path / "mnist")
    write_cifar10(tmp_path / "cifar")
    mn = dataset("mnist", tmp_path / "mnist")
    x, y = mn[3]
    assert len(mn) == 64 and tuple(x.shape) == (1, 28, 28) and y == 3
    assert len(dataset("mnist", tmp_path / "mnist", train=False)) == 16
    cf = dataset("cifar10", tmp_path / "cifar")
    assert len(cf) == 40 and tuple(cf[0][0].shape) == (3, 32, 32) and cf.classes[0] == "c0"


def test_training_on_real_mnist_and_cifar10(cli, tmp_path):
    """Each rank trains on its own shard of the real files; rank 0 alone writes the checkpoint."""
    write_mnist(tmp_path / "mnist")
    write_cifar10(tmp_path / "cifar", per_batch=4)
    for data, model, ranks in (("mnist", "mnist_cnn", 2), ("cifar10", "cifar_resnet18", 1)):
        sweep = write(tmp_path / f"{data}.toml", f"""
[workload]
data = "{data}"
data_dir = "{tmp_path / ('mnist' if data == 'mnist' else 'cifar')}"
model = "{model}"
batch_size = 4
steps = 3
warmup_steps = 1
checkpoint = true
lr_scaling = false
[matrix]
ranks_per_node = [{ranks}]
""")
        run = tmp_path / f"run-{data}"
        proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(run), timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [p] = RunDir.open(run).points()
        paths = RunDir.open(run).point(p)
        rec = json.loads(paths.result.read_text())
        assert rec["data"] == data and rec["world_size"] == ranks and rec["lr"] == 0.01 and not rec["lr_scaled"]
        assert len(rec["step_times_s"]) == 3 and rec["throughput"] > 0
        # The real readers go through the timed wait for the batch too (issue 12), inside the step.
        assert len(rec["input_times_s"]) == 3 and 0 < rec["input_time_s"] < rec["mean_step_time_s"]
        assert rec["input_fraction"] == pytest.approx(rec["input_time_s"] / rec["mean_step_time_s"])
        import torch

        ckpt = torch.load(paths.checkpoint, weights_only=False)
        assert ckpt["model_name"] == model and ckpt["steps"] == 4 and "conv1.weight" in ckpt["model"]


def test_missing_data_dir_is_an_error_record(cli, tmp_path):
    sweep = write(tmp_path / "m.toml", f"[workload]\ndata = 'mnist'\ndata_dir = '{tmp_path / 'nothing'}'\n"
                  "model = 'mnist_cnn'\nsteps = 2\n")
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(tmp_path / "r"), timeout=120)
    assert proc.returncode == 1
    [row] = list(csv.DictReader((tmp_path / "r" / "summary.csv").open()))
    assert row["state"] == "FAILED" and "Dataset not found" in row["reason"], row


def test_data_fetch_offline_is_one_line_exit_2(cli, tmp_path):
    # This machine has no internet: the download must fail as a usage error, not a traceback.
    proc = cli("data", "fetch", "mnist", "--dest", str(tmp_path / "d"), timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: cannot download mnist into") and proc.stderr.count("\n") == 1


# --- the real 2-node Slurm -----------------------------------------------------------------------

@pytest.mark.slurm
def test_horovod_mpi_gloo_and_ddp_gloo_on_two_node_slurm(cli, tmp_path, slurm_cluster):
    sweep = write(tmp_path / "hvd.toml", """
[slurm]
partition = "debug"
time = "00:05:00"
[workload]
model = "mnist_cnn"
batch_size = 8
steps = 4
warmup_steps = 1
timeline = true
[matrix]
nodes = [1, 2]
""" + CPU_BACKENDS + NO_DDP_MPI)
    rd = sweep_ok(cli, sweep, tmp_path / "run")
    seen = set()
    for p in rd.points():
        paths = rd.point(p)
        rec = json.loads(paths.result.read_text())
        seen.add((rec["framework"], rec["backend"], rec["nodes"]))
        assert sorted(r["slurm_node"] for r in rec["ranks"]) == (["node1", "node2"] if p.nodes == 2 else
                                                                 [rec["ranks"][0]["slurm_node"]])
        assert rec["throughput"] > 0 and rec["throughput_ci95"] > 0 and rec["step_time_ci95_s"] > 0
        assert rec["compute_time_s"] > 0 and 0 <= rec["comm_fraction"] < 1 and rec["comm_method"]
        assert rec["compute_time_ci95_s"] > 0  # so the report can tell a split from noise
        assert rec["comm_time_s"] == pytest.approx(max(rec["mean_step_time_s"] - rec["compute_time_s"], 0))
        assert rec["gpu"] is None and rec["gpu_reason"] == "device is cpu"
        assert rec["lr"] == pytest.approx(0.01 * p.world_size) and rec["lr_scaled"]
        # Every rank leaves its provenance, and the socket binding asked for is the one in effect.
        assert rec["provenance"] == [f"provenance-rank{r}.json" for r in range(p.world_size)]
        assert all((paths.dir / name).exists() for name in rec["provenance"])
        assert rec["affinity_ok"] is True, rec["affinity_detail"]
        job = paths.job_script.read_text()
        if p.framework == "horovod":
            assert rec["versions"]["horovod"] == "0.28.1"
            assert rec["timeline"] == "timeline.json" and paths.timeline.stat().st_size > 0
            # MPI controller: srun wires up PMIx; Gloo: plain srun and hpcbench's rendezvous.
            assert ("--mpi=pmix" in job) == (p.backend == "mpi")
        else:
            assert rec["timeline"] is None
    assert seen == {("horovod", "mpi", 1), ("horovod", "mpi", 2), ("horovod", "gloo", 1),
                    ("horovod", "gloo", 2), ("ddp", "gloo", 1), ("ddp", "gloo", 2)}
    # The controller really was the one asked for: Horovod logs nothing, so ask the timeline.
    mpi2 = next(p for p in rd.points() if (p.framework, p.backend, p.nodes) == ("horovod", "mpi", 2))
    gloo2 = next(p for p in rd.points() if (p.framework, p.backend, p.nodes) == ("horovod", "gloo", 2))
    assert "MPI_ALLREDUCE" in rd.point(mpi2).timeline.read_text()
    assert "GLOO_ALLREDUCE" in rd.point(gloo2).timeline.read_text()
    # explain says the timeline was recorded inside the timed steps, for Horovod's points only (DDP writes none).
    from hpcbench.explain import explain_paths

    timed = {w.label: [f for f in w.findings if f.rule == "timeline"] for w in explain_paths([str(rd.root)])}
    assert {label for label, found in timed.items() if found} == {p.label for p in rd.points()
                                                                  if p.framework == "horovod"}
    assert all(f.evidence == "result.json timeline" and "timeline = false" in f.fix
               for found in timed.values() for f in found)
    # Gloo's and Open MPI's transport, as the ranks recorded it (provenance/2), in words: torch's Gloo on the
    # interface the job script names, Horovod's on the one holding its host name's address; Open MPI's tcp
    # BTL, with the btl setting in force and its source.
    from hpcbench.parse.transport import describe, holding

    for p in rd.points():
        docs = [json.loads(f.read_text()) for f in rd.point(p).provenances()]
        said, job = describe(p.backend, docs), rd.point(p).job_script.read_text()
        assert all(d["schema"] == "hpcbench.provenance/2" for d in docs) and said is not None, p.label
        if p.backend == "gloo" and "export GLOO_SOCKET_IFNAME=lo" in job and p.framework == "ddp":
            assert said.text == "Gloo TCP over lo" and said.evidence.endswith("GLOO_SOCKET_IFNAME=lo"), said
        elif p.backend == "gloo":  # no interface named: Gloo's default device
            doc = docs[0]["transport"]
            iface = holding(doc["address"], doc["interfaces"])
            assert iface and said.text == f"Gloo TCP over {iface}" and "_IF" in said.evidence and "unset" in said.evidence
        else:  # the btl setting and where it came from: this sweep names no profile, so Debian's parameter file
            btl = said.evidence.split("btl=")[1].split(";")[0]
            assert said.text.startswith("Open MPI tcp BTL over ") and ", PML " in said.text, said
            assert btl.endswith("(environment)") == ("OMPI_MCA_btl=" in job) and "(file (/etc/openmpi/" in said.evidence



@pytest.mark.parametrize("body, message", [
    # PyPI's torch has no MPI process group; this Horovod is built without CCL.
    ("[workload]\nbackend = 'mpi'\n[matrix]\nranks_per_node = [1, 2]\n",
     ("(and 1 more points like it): DDP backend 'mpi': this torch is built without mpi; "
      "use gloo, or Horovod's mpi")),
    ("[workload]\nframework = 'horovod'\nbackend = 'oneccl'\n",
     "point hvd-oneccl-mlp-b32-n1x1: Horovod backend 'oneccl': this horovod 0.28.1 is built without ccl"),
])
def test_unavailable_backends_rejected_at_plan_time(cli, tmp_path, body, message):
    proc = cli("plan", str(write(tmp_path / "bad.toml", body)), "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "r").exists()  # nothing planned, nothing to clean up


def test_modules_defer_the_check_to_the_job(cli, tmp_path):
    # Inside the job, `module load` may bring an MPI-enabled torch: the planner cannot know, so it plans.
    body = "[slurm]\nmodules = ['torch-mpi/2.4']\n[workload]\nbackend = 'mpi'\n"
    assert cli("plan", str(write(tmp_path / "m.toml", body)), "--run-dir", str(tmp_path / "r")).returncode == 0


def test_models_match_their_references():
    import torch

    from hpcbench.workloads.models import build_model

    cnn = build_model("mnist_cnn")
    # Horovod's pytorch_mnist.py Net: conv 1->10 (5x5), conv 10->20 (5x5), fc 320->50, fc 50->10.
    assert sum(p.numel() for p in cnn.parameters()) == 260 + 5020 + 16050 + 510
    cifar = build_model("cifar_resnet18")
    assert tuple(cifar.conv1.weight.shape) == (64, 3, 3, 3) and isinstance(cifar.maxpool, torch.nn.Identity)
    assert tuple(cifar(torch.randn(2, 3, 32, 32)).shape) == (2, 10)
    lm = build_model("lstm_lm")
    assert tuple(lm(torch.randint(0, 10000, (2, 35))).shape) == (2, 35, 10000) and lm.lstm.num_layers == 2


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_registry_parameter_counts_are_the_models(name):
    """The scaling model reduces params x 4 bytes of gradient: the count planning knows must be torch's."""
    from hpcbench.workloads.models import build_model

    assert sum(p.numel() for p in build_model(name).parameters() if p.requires_grad) == MODELS[name].params


def test_lstm_with_horovod_gloo_and_strong_scaling(cli, tmp_path):
    """Token data and per-position loss, Horovod's Gloo rendezvous without Slurm, the global batch split."""
    sweep = write(tmp_path / "lm.toml", "[workload]\nframework = 'horovod'\nmodel = 'lstm_lm'\nscaling = 'strong'\n"
                  "global_batch_size = 4\nsteps = 2\nwarmup_steps = 1\n[matrix]\nranks_per_node = [2]\n")
    run = tmp_path / "r"
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(run), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [p] = RunDir.open(run).points()
    rec = json.loads(RunDir.open(run).point(p).result.read_text())
    assert (rec["framework"], rec["backend"], rec["world_size"]) == ("horovod", "gloo", 2)
    assert (rec["scaling"], rec["global_batch_size"], rec["batch_size"]) == ("strong", 4, 2)
    assert rec["throughput"] == pytest.approx(4 / rec["mean_step_time_s"])
    assert rec["throughput_per_rank"] == pytest.approx(2 / rec["mean_step_time_s"])


def test_gpu_samples_pool_over_ranks_or_say_why_not():
    from hpcbench.workloads.gpumon import GpuSampler, summarize

    util, reason = summarize([([(50.0, 1000.0), (70.0, 2000.0)], "nvml", None), ([(90.0, 1500.0)], "nvml", None)])
    assert reason is None and (util.util_mean, util.util_min, util.mem_used_mib_max, util.samples) == (70, 50, 2000, 3)
    with GpuSampler(cuda=False, index=0) as s:
        pass
    assert summarize([(s.samples, s.source, s.reason)]) == (None, "device is cpu")
