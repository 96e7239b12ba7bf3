"""Constructed lines for the formats the corpus only hints at: every prefix, NCCL 2.2-2.29 wording,
wrapping, interleaving, nccl-tests variants, records (the fast path: test_logs_fastpath.py)."""

from __future__ import annotations

import json

import pytest

from hpcbench.parse import parse_file
from hpcbench.parse.nccl import normalise
from hpcbench.records import RankInfo, ResultRecord
from hpcbench.workloads import summary


def parse_text(tmp_path, text: str | bytes, name: str = "x.log") -> dict:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return parse_file(p)


@pytest.mark.parametrize(("raw", "norm"), [
    ("P2P/IPC", "P2P/IPC"), ("P2P/IPC/read", "P2P/IPC"), ("P2P/IPC/CE", "P2P/IPC"),
    ("P2P/CUMEM/read", "P2P/CUMEM"), ("P2P/CUMEM", "P2P/CUMEM"), ("P2P/MNNVL/read", "P2P/MNNVL"),
    ("P2P/direct pointer", "P2P/direct"), ("P2P/direct pointer/read", "P2P/direct"),
    ("P2P/indirect/3[3]/read", "P2P/indirect"),
    ("SHM/direct/direct", "SHM"), ("SHM/CE/direct", "SHM"), ("direct shared memory", "SHM"),
    ("NET/IB/0", "NET/IB"), ("NET/IB/3/GDRDMA", "NET/IB/GDRDMA"), ("NET/IB/0/GDRDMA(PCI)", "NET/IB/GDRDMA"),
    ("NET/IB/1(5)/GDRDMA", "NET/IB/GDRDMA"), ("NET/IB/0/Shared", "NET/IB"), ("NET/IB/2/GDRDMA/Shared", "NET/IB/GDRDMA"),
    ("NET/Socket/0", "NET/Socket"), ("NET/Socket/1", "NET/Socket"), ("NET/IBext/0", "NET/IBext"),
    ("NET/IBext_v8/1/GDRDMA", "NET/IBext_v8/GDRDMA"), ("NET/AWS Libfabric/0", "NET/AWS Libfabric"),
    ("NET/AWS Libfabric/3/GDRDMA", "NET/AWS Libfabric/GDRDMA"), ("COLLNET/SHARP/0/GDRDMA", "CollNet"),
    ("NVLS", "NVLS"),
])
def test_transport_normalisation(raw, norm):
    assert normalise(raw) == norm


@pytest.mark.parametrize("prefix", [
    "", "[1,3]<stdout>:", "[1,3]<stderr>:", "[3]<stdout>:", "3: ", " 12: ", "10.0.0.7: ", "[default3]:", "[rank3]:",
    "(RayTrainWorker pid=355353) ", "(pid=42, ip=10.1.2.3) ", "2025-05-16T16:39:51.208-07:00",
    "2025-05-16T16:39:51.208Z ", "[2026-09-01 16:19:24] ", "2024-01-02 03:04:05,123 ", "worker_1  | ",
    "\x1b[32m", "Nov 22 03:27:12 ",
])
def test_prefixes_never_hide_or_fake_the_host(tmp_path, prefix):
    text = (f"{prefix}gpu-a1:100:200 [3] NCCL INFO Using network IB\n"
            f"{prefix}gpu-a1:100:200 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC/read\r\n"
            f"{prefix}NCCL version 2.21.5+cuda12.4\n")
    n = parse_text(tmp_path, text)["nccl"]
    assert n["hosts"] == ["gpu-a1"]
    assert n["network"] == "IB" and n["version"] == "2.21.5+cuda12.4"
    assert n["transports"] == ["P2P/IPC"] and n["edges"][0]["host"] == "gpu-a1"


def test_lines_that_look_like_host_pid_tid_are_not_hosts(tmp_path):
    d = parse_text(tmp_path, (
        "libfabric:85:1747438790::core:core:fi_getinfo_():1392<warn> fi_getinfo: provider efa output empty list\n"
        "10.1.2.3:45:67 [0] NCCL INFO Using network Socket\n"
        "calhost/replica:0/task:0/device:GPU:0 with 23072 MB memory\n"
        "> horovodrun -np 8 -H node1:4,node2:4 python train.py\n"))
    assert d["hosts"] == []
    assert d["nccl"]["network"] == "Socket"


def test_mpirun_tags_in_the_middle_of_a_line(tmp_path):
    d = parse_text(tmp_path, (
        "[1,0]<stdout>:na:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"
        "[1,1]<stdout>:nb:2:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA\n"))
    n = d["nccl"]
    assert n["hosts"] == ["na", "nb"]
    assert n["transports"] == ["NET/IB/GDRDMA", "P2P/IPC"]
    assert d["launcher_prefix"] == "[1,N]<stdout>:"


def test_hard_wrapped_nccl_line_is_joined(tmp_path):
    line = "node-with-a-rather-long-name-01:123456:654321 [0] NCCL INFO Channel 00/0 : 0[1a000] -> 1[1b000] via P2P/IPC/read"
    cut = 80
    d = parse_text(tmp_path, line[:cut] + "\n" + line[cut:] + "\nnode-with-a-rather-long-name-01:1:1 [0] NCCL INFO Using network IB\n")
    assert d["nccl"]["transports_raw"] == ["P2P/IPC/read"]
    assert d["nccl"]["network"] == "IB"


@pytest.mark.parametrize("host", ["gpu-001", "h1", "node-with-a-rather-long-name-01"])
@pytest.mark.parametrize("own", ["step 1: loss 0.5", "Epoch 3/10", "Iter #2: 601.7 img/sec per GPU", "loss=0.25",
                                 "Initializing NCCL across 2 nodes...", "Running benchmark...",
                                 "hpcbench: gloo-mlp-b16-n2x1: 6462.4 samples/s, 4.95 ms/step over 2 ranks"])
def test_a_print_of_its_own_after_an_nccl_line_is_not_glued_on(tmp_path, host, own):
    """The training's own line after a long NCCL line (issue 25: 'NET/IB/1/GDRDMAstep 1: loss 0.5') is read as
    a line: it starts as a program's print does, where a terminal's cut falls mostly inside a word."""
    d = parse_text(tmp_path, f"{host}:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                             f"{host}:100:101 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA\n"
                             f"{own}\n")
    assert d["nccl"]["transports_raw"] == ["NET/IB/1/GDRDMA"] and d["nccl"]["transports"] == ["NET/IB/GDRDMA"]
    assert (d["hpcbench"] is not None) == own.startswith("hpcbench: ")


def test_short_lines_are_not_joined(tmp_path):
    d = parse_text(tmp_path, "h:1:1 [0] NCCL INFO Using network IB\nSocket\n")
    assert d["nccl"]["network"] == "IB"


def test_cloudwatch_duplicated_message_is_read_once(tmp_path):
    msg = "wi-1:93:93 [0] NCCL INFO Using network IB"
    d = parse_text(tmp_path, f"  | 2025-05-16T16:39:51.208-07:00{msg} | {msg}\n  | 2025-05-16T16:39:51.208-07:00 | {msg}\n")
    assert d["nccl"]["network"] == "IB" and d["hosts"] == ["wi-1"]


def test_old_nccl_wording(tmp_path):
    d = parse_text(tmp_path, (
        "n1:1:1 [0] NCCL INFO NET/IB : No device found.\n"
        "n1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        "n1:1:1 [0] NCCL INFO Ring 00 :    0   1   2   3\n"
        "n1:1:1 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via direct shared memory\n"
        "n1:1:1 [0] NCCL INFO Ring 01 : 3 -> 0 [receive] via NET/Socket/0\n"
        "n1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 4 - COMPLETE\n"))
    n = d["nccl"]
    assert n["network"] == "Socket" and n["network_source"] == "selection_line"
    assert n["transports"] == ["NET/Socket", "SHM"]
    assert n["nranks"] == 4
    assert [(e["src"], e["dst"], e["scope"]) for e in n["edges"]] == [(0, 1, "intra"), (3, 0, "inter")]


def test_ib_using_with_failure_is_not_ib(tmp_path):
    d = parse_text(tmp_path, "n:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:1.2.3.4<0>\n"
                             "n:1:1 [0] NCCL INFO NET/IB : No device found.\n")
    assert d["nccl"]["network"] is None
    assert d["nccl"]["ib_devices"][0] == "mlx5_0"


@pytest.mark.parametrize(("lines", "used"), [
    (["NVLS multicast support is available on dev 0"], False),
    (["NVLS multicast support is not available on dev 0"], False),
    (["16 coll channels, 0 nvls channels, 16 p2p channels, 16 p2p channels per peer"], False),
    (["NCCL_ALGO set by environment to Tree,Ring,CollnetDirect,CollnetChain,NVLS"], False),
    (["comm:0x5, nRanks:4, nNodes:1, coll channels:8 collnet channels:8, nvls channels:0, p2p channels:8"], False),
    (["24 coll channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer"], True),
    (["NVLS comm 0x559 headRank 2 nHeads 8 buffSize 4194304 memSize 2097152"], True),
    (["Connected NVLS tree"], True),
])
def test_nvls_counts_only_when_connected(tmp_path, lines, used):
    d = parse_text(tmp_path, "".join(f"h:1:1 [0] NCCL INFO {x}\n" for x in lines))
    assert d["nccl"]["nvls_used"] is used
    assert ("NVLS" in d["nccl"]["transports"]) is used


def test_collnet(tmp_path):
    off = parse_text(tmp_path, "h:1:1 [0] graph/tuning.cc:187 NCCL WARN CollNet is not supported or fails to "
                               "initialize, ignoring NCCL_ALGO=COLLNET\n")
    assert off["nccl"]["collnet_used"] is False
    on = parse_text(tmp_path, "h:1:1 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA\n"
                              "h:1:1 [0] NCCL INFO Coll 01 : 0 [receive] via COLLNET/IBext/0\n")
    assert on["nccl"]["collnet_used"] is True and on["nccl"]["transports"] == ["CollNet"]


def test_edges_scope_from_init_lines_and_dedup(tmp_path):
    text = "".join([
        "na:1:1 [0] NCCL INFO comm 0xa rank 0 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE\n",
        "na:1:2 [1] NCCL INFO comm 0xb rank 1 nranks 4 cudaDev 1 busId 2000 - Init COMPLETE\n",
        "nb:2:1 [0] NCCL INFO comm 0xc rank 2 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE\n",
        "nb:2:2 [1] NCCL INFO comm 0xd rank 3 nranks 4 cudaDev 1 busId 2000 - Init COMPLETE\n",
    ] + ["na:1:1 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[2000] via P2P/IPC\n"] * 5 + [
        "na:1:2 [1] NCCL INFO Channel 00/0 : 1[2000] -> 2[1000] [send] via NET/Socket/0\n",
        "nb:2:1 [0] NCCL INFO Channel 00/0 : 1[2000] -> 2[1000] [receive] via NET/Socket/0\n",
        "nb:2:2 [1] NCCL INFO Channel 01/0 : 3[2000] -> 2[1000] via SHM/direct/direct\n",
    ])
    n = parse_text(tmp_path, text)["nccl"]
    got = [(e["channel"], e["src"], e["dst"], e["transport"], e["scope"], e["host"]) for e in n["edges"]]
    assert got == [(0, 0, 1, "P2P/IPC", "intra", "na"), (0, 1, 2, "NET/Socket", "inter", "na"),
                   (1, 3, 2, "SHM", "intra", "nb")]
    assert n["nranks"] == 4


NT_HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n")


def _row(size: int, busbw: float, wrong: str = "N/A") -> str:
    return (f"{size:12d}  {size // 4:12d}     float     sum      -1    10.00  {busbw:6.2f}  {busbw:6.2f}  {wrong:>6s}"
            f"    10.00  {busbw:6.2f}  {busbw:6.2f}  {wrong:>6s}\n")


def test_nccltests_two_processes_interleaved(tmp_path):
    text = ("[1,0]<stdout>:" + NT_HEADER.replace("\n#", "\n[1,0]<stdout>:#") + "[1,1]<stdout>:" + NT_HEADER.splitlines()[0] + "\n"
            + "[1,0]<stdout>:" + _row(1024, 1.0) + "[1,1]<stdout>:" + _row(4096, 3.0) + "[1,0]<stdout>:" + _row(2048, 2.0)
            + "h:1:1 [0] NCCL INFO Launch mode Parallel\n"
            + "[1,0]<stdout>:# Avg bus bandwidth    : 2.0 \n./broadcast_perf -b 8 -e 128M\n")
    t = parse_text(tmp_path, text)["nccl_tests"]
    assert [r["size"] for r in t["rows"]] == [1024, 4096, 2048]
    assert t["largest"]["size"] == 4096 and t["largest"]["oop_busbw"] == 3.0
    assert t["rows"][0]["ip_wrong"] == "N/A" and t["rows"][0]["oop_wrong"] == "N/A"
    assert t["avg_busbw"] == 2.0 and t["collective"] == "all_reduce"


def test_validation_off_on_one_side_only_is_not_all_reduce(tmp_path):
    """sendrecv prints all_reduce's columns (sum, -1, count = size / 4) but checks only out-of-place
    (nccl-tests src/sendrecv.cu: reportErrors = in_place ? 0 : 1)."""
    row = _row(1024, 1.0, "0").rsplit("0\n", 1)[0] + "N/A\n"
    t = parse_text(tmp_path, NT_HEADER + row)["nccl_tests"]
    assert t["rows"][0]["oop_wrong"] == 0 and t["rows"][0]["ip_wrong"] == "N/A"
    assert t["collective"] is None
    assert parse_text(tmp_path, NT_HEADER + _row(1024, 1.0, "0"))["nccl_tests"]["collective"] == "all_reduce"


def test_nccltests_overflowed_columns_and_command_line(tmp_path):
    text = ("mpirun -np 16 ./build/reduce_scatter_perf -b 8 -e 16G\n" + NT_HEADER
            + " 17179869184    4294967296     float     sum      -1  1234567  191.99  359.98      0  1234568  191.75  359.53      0\n"
              "# Avg bus bandwidth    : 142.652 \n")
    t = parse_text(tmp_path, text)["nccl_tests"]
    assert t["collective"] == "reduce_scatter"
    assert t["rows"][0]["size"] == 17179869184 and t["rows"][0]["oop_time_us"] == 1234567.0


def test_nccltests_old_layout_without_redop_and_root(tmp_path):
    text = ("       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error\n"
            "          8             2   float    10.87    0.00    0.00  0e+00    10.55    0.00    0.00  0e+00\n")
    t = parse_text(tmp_path, text)["nccl_tests"]
    assert t["has_redop_column"] is False and t["wrong_column"] == "error"
    assert t["rows"][0]["redop"] is None and t["rows"][0]["oop_wrong"] == 0.0


def test_tf_cnn_benchmarks_total(tmp_path):
    h = parse_text(tmp_path, "----------------------------------------------------------------\n"
                             "total images/sec: 2841.07\n")["horovod"]
    assert h["total_img_sec"] == 2841.07 and h["per_gpu_img_sec"] is None


def _record() -> dict:
    r = ResultRecord(point_id="p1", label="ddp", framework="ddp", backend="nccl", model="mlp", device="cpu",
                     batch_size=8, nodes=1, ranks_per_node=2, world_size=2, warmup_steps=1, steps=2,
                     step_times_s=[0.1, 0.1], mean_step_time_s=0.1, throughput=160.0, throughput_per_rank=80.0,
                     ranks=[RankInfo(0, 0, "node1", "node1", 1, [0])], started_at="t0", finished_at="t1",
                     job_id=None, measurement="m")
    return r.to_dict()


def test_records_in_a_log_and_as_a_file(tmp_path):
    rec = _record()
    d = parse_text(tmp_path, "starting\n[1,0]<stdout>:RESULT " + json.dumps(rec) + "\nbye\n")
    assert d["records"] == [json.loads(json.dumps(rec))]
    f = parse_text(tmp_path, json.dumps(rec, indent=2), name="result.json")
    assert f["records"][0]["point_id"] == "p1"
    future = dict(rec, schema="hpcbench.result/99")
    w = parse_text(tmp_path, json.dumps(future) + "\n")
    assert w["records"] == [] and any("not known" in x for x in w["warnings"])


@pytest.mark.parametrize("lead", ["", "0: ", "[1,0]<stdout>:"])  # as sbatch, srun -l and mpirun write them
def test_an_hpcbench_job_log(tmp_path, lead):
    """What rank 0 prints at the end of a point's job (workloads/summary.py), among Gloo's warnings: its summary
    line and its record, read back; a job log of before the record was printed (the summary line alone) too."""
    rec = _record()
    said = summary.lines("ddp-mlp-b8-n1x2", summary.train(160.0, 0.1, 2), rec)
    d = parse_text(tmp_path, "[W socket.cpp:663] [c10d] The client socket has failed to connect.\n"
                   + "".join(f"{lead}{line}\n" for line in said))
    assert d["records"] == [json.loads(json.dumps(rec))] and d["warnings"] == []
    assert d["hpcbench"] == [{"label": "ddp-mlp-b8-n1x2", "kind": "train", "throughput": 160.0, "unit": "samples/s",
                              "step_ms": 100.0, "ranks": 2}]
    old = parse_text(tmp_path, said[0] + "\n")
    assert old["hpcbench"] == d["hpcbench"] and old["warnings"] == []
    coll = parse_text(tmp_path, summary.lines("gloo-allreduce", summary.collective("all_reduce", 1.25, 1 << 20, 0, 4), {})[0])
    assert coll["hpcbench"][0] | {"label": ""} == {"label": "", "kind": "collective", "collective": "all_reduce",
                                                    "throughput": 1.25, "unit": "GB/s busbw", "size_bytes": 1 << 20,
                                                    "wrong": 0, "ranks": 4}
    none = parse_text(tmp_path, summary.lines("mpi-x", summary.unsupported("no MPI process group in torch"), {})[0])
    assert none["hpcbench"] == [{"label": "mpi-x", "kind": "unsupported", "reason": "no MPI process group in torch"}]
    assert parse_text(tmp_path, "hpcbench: warning: backend 'x' cannot be loaded\n")["hpcbench"] is None


def test_horovod_on_cpu_and_the_launchers_rank_count(tmp_path):
    cpu = parse_text(tmp_path, "$ horovodrun -np 2 -H localhost:2 python pytorch_synthetic_benchmark.py --no-cuda\n"
                               "[0]<stdout>:Number of CPUs: 2\n[0]<stdout>:Img/sec per CPU: 10.5 +-0.4\n"
                               "[0]<stdout>:Total img/sec on 2 CPU(s): 21.0 +-0.8\n")["horovod"]
    assert (cpu["device"], cpu["num_cpus"], cpu["num_gpus"], cpu["total_img_sec"]) == ("CPU", 2, None, 21.0)
    assert (cpu["per_cpu_img_sec"], cpu["per_gpu_img_sec"], cpu["ranks"], cpu["launcher_np"]) == (10.5, None, 2, 2)
    tf = parse_text(tmp_path, "mpirun -np 4 --allow-run-as-root python3 tf_cnn_benchmarks.py --variable_update=horovod\n"
                              "total images/sec: 608.38\n")["horovod"]
    assert (tf["ranks"], tf["ranks_source"], tf["launcher_np"], tf["num_gpus"]) == (4, "launcher", 4, None)
    two = parse_text(tmp_path, "mpirun -np 1 python a.py\nTotal img/sec on 1 GPU(s): 100.0 +-1.0\nmpirun -np 8 python a.py\n")
    assert (two["horovod"]["launcher_np"], two["horovod"]["ranks_source"]) == (1, "total line")  # the run of the totals


@pytest.mark.parametrize(("devices", "network", "link"), [
    (" [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE", "RoCE", "RoCE"), (" [0]mlx5_0:1/IB", "IB", "IB"),
    (" [0]mlx5_0:1/IB [1]mlx5_2:1/RoCE", "IB", "IB+RoCE"),
])
def test_the_network_is_named_as_a_user_names_it(tmp_path, devices, network, link):
    n = parse_text(tmp_path, f"h:1:1 [0] NCCL INFO NET/IB : Using{devices} [RO]; OOB eth0:10.0.0.1<0>\n"
                             "h:1:1 [0] NCCL INFO Using network IB\n")["nccl"]
    assert (n["network"], n["ib_link_layer"]) == (network, link)
    plugin = parse_text(tmp_path, f"h:1:1 [0] NCCL INFO NET/IB : Using{devices} [RO]; OOB eth0:10.0.0.1<0>\n"
                                  "h:1:1 [0] NCCL INFO Using network IBext_v8\n")["nccl"]
    assert plugin["network"] == "IBext_v8"  # a plugin keeps its own name; the link layer says RoCE
    lines = parse_text(tmp_path, f"h:1:1 [0] NCCL INFO NET/IB : Using{devices} [RO]; OOB eth0:10.0.0.1<0>\n"
                                 "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n")["nccl"]
    assert (lines["network"], lines["network_source"]) == (network, "selection_line")  # NET/IB : Using, no failure


@pytest.mark.parametrize("line", [
    "[12] nd-3:1:2 [0] NCCL INFO Using network IB", "[trainer3]:nd-3:1:2 [3] NCCL INFO Using network IB",
    "[trainer0|0]:nd-3:1:2 [0] NCCL INFO Using network IB", "2025-11-12 20:41:43,851 - INFO - nd-3:1:2 [0] NCCL INFO Using network IB",
    "nd-3:1:2 [0] INFO Using internal Network IB", "error info : nd-3:1:2 [1] NCCL INFO Using network IB",
    "nd-3:5:6 [6] NCCL INFO nd-3:1:2 [7] NCCL INFO Using network IB",
])
def test_hosts_from_every_prefix(tmp_path, line):
    n = parse_text(tmp_path, line + "\n")["nccl"]
    assert n["hosts"] == ["nd-3"] and n["network"] == "IB"


def test_a_prefix_glued_to_a_cut_word_names_no_host(tmp_path):
    d = parse_text(tmp_path, "h1:2:3 [1] NCCL INFO comm 0x49 rank 1 nranks 4 cudaDev 1 nvmh1:880:880 [3] NCCL INFO cudaDriverVersion 1\n")
    assert d["hosts"] == ["h1"] and d["nccl"]["nranks"] == 4


def test_interleaved_orphan_message_is_no_wrapped_line(tmp_path):
    text = ("h:1:1 [1] NCCL INFO h:2:2 [2] NCCL INFO Ring 05 : 2[2] -> 3[3] via P2P/IPC " + "x" * 40 + "\n"
            "Ring 05 : 1[1] -> 2[2] via P2P/IPC\n")
    assert parse_text(tmp_path, text)["nccl"]["transports_raw"] == ["P2P/IPC", "P2P/IPC " + "x" * 40]


def test_reduce_scatter_is_inferred_from_count_and_size(tmp_path):
    rows = "".join(f"{s:12d}  {s // 32:12d}     float     sum      -1    10.00    1.00    1.00      0    10.00    1.00    1.00      0\n"
                   for s in (128, 256, 1024))
    assert parse_text(tmp_path, NT_HEADER + rows)["nccl_tests"]["collective"] == "reduce_scatter"
