"""The evidence the explain engine reads (issue 12): the wait for the batch per step, each rank's own step and
compute times, the straggler knob, the nodes' load, and the record and report fields that carry them; the
straggler on the real 2-node Slurm, and the GPU layouts' launcher options run by the real tools."""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import replace

import pytest
from conftest import sweep_ok, write

from hpcbench.figures.samples import from_record
from hpcbench.ops import nodes
from hpcbench.plan.expand import expand
from hpcbench.plan.spec import parse
from hpcbench.records import NodeLoad, RankInfo, ResultRecord
from hpcbench.report.tidy import tidy_row
from hpcbench.submit.launch import plan_launch
from hpcbench.workloads import placement
from hpcbench.workloads.config import TrainConfig
from hpcbench.workloads.steps import rank_means, slowest, timed_steps, train_step, with_delay

# --- the step, without torch: what it waits for and what it keeps ---------------------------------------------


class _Loss:
    def backward(self) -> None:
        pass


class _Opt:
    def zero_grad(self) -> None:
        pass

    def step(self) -> None:
        pass


class _Info:
    tokens = False


def _slow_data(seconds: float):
    while True:
        time.sleep(seconds)
        yield 1, 2


def _step(data, waits):
    return train_step(lambda x: x, _Opt(), data, _Info(), lambda out, y: _Loss(), waits)


def test_the_wait_for_the_batch_is_timed_per_step_and_only_for_the_timed_steps():
    waits: list[float] = []
    times = timed_steps(3, 4, _step(_slow_data(0.02), waits), lambda: None, waits=waits)
    assert len(waits) == 4 == len(times)  # the 3 warm-up waits are dropped
    assert all(0.018 <= w <= t for w, t in zip(waits, times)), (waits, times)  # inside the step, and most of it
    quick: list[float] = []
    timed_steps(0, 4, _step(_slow_data(0.0), quick), lambda: None, waits=quick)
    assert max(quick) < 0.005 < min(waits)


def test_slow_rank_sleeps_every_step_on_that_rank_only():
    cfg = TrainConfig(out="o", point_id="p", label="l", slow_rank=1, slow_ms=30)
    step = _step(_slow_data(0.0), None)
    assert with_delay(cfg, 0, step) is step and with_delay(cfg, 2, step) is step  # rank 2 of 2: never exists
    t = timed_steps(1, 3, with_delay(cfg, 1, step), lambda: None)
    assert all(0.028 <= x < 0.2 for x in t), t
    off = TrainConfig(out="o", point_id="p", label="l")
    assert (off.slow_rank, off.slow_ms) == (-1, 100) and with_delay(off, 0, step) is step


def test_slowest_per_step_and_each_ranks_own_mean():
    per_rank = [[1.0, 2.0, 3.0], [2.0, 1.5, 3.0]]
    # the slowest rank's own steps, not a per-step maximum ([2.0, 2.0, 3.0], 7.0 s where neither rank took over 6.5)
    assert slowest(per_rank) == [2.0, 1.5, 3.0] and slowest([]) == []
    assert rank_means(per_rank) == [2.0, 6.5 / 3] and rank_means([[0.5], []]) == [0.5, None]


def test_slow_knobs_are_quiet_so_existing_ids_stay():
    plain = expand(parse("[matrix]\nranks_per_node = [2]\n", "x.toml"))[0]
    slow = expand(parse("[workload]\nslow_rank = 1\nslow_ms = 50\n[matrix]\nranks_per_node = [2]\n", "x.toml"))[0]
    at_default = expand(parse("[workload]\nslow_rank = -1\nslow_ms = 100\n[matrix]\nranks_per_node = [2]\n",
                              "x.toml"))[0]
    assert plain.id == at_default.id != slow.id


# --- node load, the record and the report rows -----------------------------------------------------------------

def test_load_probe_reads_one_entry_per_node_before_and_after():
    probe = placement.LoadProbe(True)
    with probe:
        pass
    e = probe.entry
    assert e["cpus"] == os.cpu_count() and e["cores"] >= 1 and len(e["before"]) == len(e["after"]) == 3
    assert e["kernel"] == open("/proc/sys/kernel/random/boot_id").read().strip() and e["kernel_cpus"] == os.cpu_count()
    idle = placement.LoadProbe(False)
    with idle:
        pass
    assert idle.entry is None
    ranks = [RankInfo(r, r % 2, e["host"], e["slurm_node"], 1, [0], 2) for r in range(4)]
    [node] = placement.node_loads([e, None], ranks)
    assert (node.ranks, node.cpus_per_task, node.cpus) == (4, 2, os.cpu_count())


def _record(**kw) -> ResultRecord:
    ranks = [RankInfo(0, 0, "h1", "node1", 10, [0]), RankInfo(1, 0, "h2", "node2", 11, [1])]
    return ResultRecord(point_id="p", label="l", framework="ddp", backend="gloo", model="mlp", device="cpu",
                        batch_size=8, nodes=2, ranks_per_node=1, world_size=2, warmup_steps=1, steps=2,
                        step_times_s=[0.2, 0.2], mean_step_time_s=0.2, throughput=80.0, throughput_per_rank=40.0,
                        ranks=ranks, started_at="a", finished_at="b", job_id="1", measurement="m", **kw)


def test_record_fields_round_trip_and_old_records_still_read():
    load = NodeLoad("h2", "node2", 2, [1.0, 0.5, 0.2], [1.5, 0.6, 0.2], cores=2, ranks=1, cpus_per_task=1)
    rec = _record(input_times_s=[0.001, 0.003], input_time_s=0.002, input_fraction=0.01, rank_step_s=[0.2, 0.2],
                  rank_compute_s=[0.01, 0.21], rank_input_s=[0.001, 0.002], node_load=[load], gpu_numa_ok=None,
                  gpu_numa_detail="device is cpu")
    back = ResultRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back == rec and back.node_load[0].before == [1.0, 0.5, 0.2]
    old = {k: v for k, v in rec.to_dict().items() if k not in ("input_times_s", "input_time_s", "input_fraction",
                                                               "rank_step_s", "rank_compute_s", "rank_input_s",
                                                               "node_load", "gpu_numa_ok", "gpu_numa_detail")}
    assert ResultRecord.from_dict(old) == replace(rec, input_times_s=[], input_time_s=None, input_fraction=None,
                                                  rank_step_s=[], rank_compute_s=[], rank_input_s=[], node_load=[],
                                                  gpu_numa_detail=None)
    s = from_record(back, "run")
    assert s.record is back  # explain's rules read the per-rank and per-node figures from the record itself
    row = tidy_row(s)
    assert row["input_time_ms"] == pytest.approx(2.0) and row["input_fraction"] == 0.01
    assert "gpu_numa_ok" in row and "rank_compute_s" not in row and "node_load" not in row


# --- the real 2-node Slurm ---------------------------------------------------------------------------------------

@pytest.mark.slurm
@pytest.mark.torch
def test_a_straggler_on_two_node_slurm_shows_in_its_own_compute_time(cli, tmp_path, slurm_cluster):
    """DDP-gloo, 2 nodes x 1 rank, rank 1 sleeping 200 ms a step: everyone's step takes the 200 ms (rank 0 waits
    at the allreduce), but only rank 1's own compute-only steps do; its node is named; each node's load is there."""
    sweep = write(tmp_path / "slow.toml", """
[slurm]
partition = "debug"
time = "00:05:00"
[workload]
model = "mlp"
batch_size = 8
steps = 4
warmup_steps = 1
slow_rank = 1
slow_ms = 200
[matrix]
nodes = [2]
""")
    rd = sweep_ok(cli, sweep, tmp_path / "run")
    [p] = rd.points()
    paths = rd.point(p)
    rec = json.loads(paths.result.read_text())
    print(json.dumps({k: rec[k] for k in ("rank_step_s", "rank_compute_s", "rank_input_s", "input_time_s",
                                          "input_fraction", "mean_step_time_s", "compute_time_s", "node_load")}))
    step, compute = rec["rank_step_s"], rec["rank_compute_s"]
    assert len(step) == len(compute) == 2
    assert compute[1] - compute[0] >= 0.18 and compute[0] < 0.1, compute  # the straggler's own compute
    assert min(step) >= 0.2 and abs(step[1] - step[0]) < 0.1, step  # a synchronous step: both wait for it
    assert [r["slurm_node"] for r in rec["ranks"]] == ["node1", "node2"]  # so: rank 1 on node2
    assert [r["cpus_per_task"] for r in rec["ranks"]] == [1, 1]
    assert 0 <= rec["input_time_s"] < 0.01 * rec["mean_step_time_s"] and rec["input_fraction"] < 0.01
    assert len(rec["input_times_s"]) == 4 and len(rec["rank_input_s"]) == 2
    loads = rec["node_load"]
    assert [n["slurm_node"] for n in loads] == ["node1", "node2"]
    for n in loads:
        # the CPUs the node can use: its cpuset's (a minicluster node with cores of its own), else the host's
        own = len(nodes.cpuset_of(nodes.Layout(slurm_cluster), n["slurm_node"]))
        assert n["cpus"] == own <= (os.cpu_count() or 1) and n["ranks"] == 1 and n["cpus_per_task"] == 1
        assert len(n["before"]) == len(n["after"]) == 3 and all(x >= 0 for x in n["before"] + n["after"])
    prov = json.loads((paths.dir / "provenance-rank1.json").read_text())["gpu_binding"]
    assert prov["gpu"] is None and prov["detail"] == "device is cpu" and prov["numa_nodes"] == [0]
    assert rec["gpu_numa_ok"] is None and rec["gpu_numa_detail"] == "device is cpu"


@pytest.mark.slurm
def test_the_gpu_layouts_launcher_options_are_taken_by_srun_and_mpirun(tmp_path, slurm_cluster):
    """No GPU here: the GPU point's srun (block) and mpirun lines run a plain command, so Slurm and OpenMPI
    both take the options as rendered; under mpirun the ranks come numbered in blocks per socket."""
    body = '[workload]\ndevice = "cuda"\nbackend = "nccl"\n[matrix]\nnodes = [{n}]\ngpus_per_node = [2]\n'
    srun_spec = parse('[slurm]\ngpu_bind = "block"\n' + body.format(n=2), "g.toml")
    [point] = expand(srun_spec)
    srun = list(plan_launch(srun_spec, point, str(tmp_path), "python3").words.argv)
    assert "--distribution=block:block" in srun
    ran = subprocess.run([srun[0], "--partition=debug", "--nodes=2", "--time=1", *srun[1:], "bash", "-c",
                          'echo "$SLURM_PROCID $SLURMD_NODENAME $SLURM_DISTRIBUTION"'],
                         capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr
    assert sorted(ran.stdout.split("\n")[:-1]) == ["0 node1 block:block", "1 node1 block:block",
                                                   "2 node2 block:block", "3 node2 block:block"]
    mpi_spec = parse('[slurm]\nlauncher = "mpirun"\n' + body.format(n=1), "g.toml")
    [point] = expand(mpi_spec)
    mpirun = list(plan_launch(mpi_spec, point, str(tmp_path), "python3").words.argv)
    assert mpirun[3:9] == ["--map-by", "socket", "--rank-by", "core", "--bind-to", "socket"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}  # this machine, no allocation
    ran = subprocess.run([*mpirun, "bash", "-c", 'echo "$OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_LOCAL_RANK"'],
                         capture_output=True, text=True, timeout=120, env={**env, "NCCL_DEBUG": "INFO"}, check=False)
    assert ran.returncode == 0, ran.stderr
    assert sorted(ran.stdout.split("\n")[:-1]) == ["0 0", "1 1"]
