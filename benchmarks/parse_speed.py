"""How fast is `hpcbench parse` on a big NCCL_DEBUG=INFO log? Prints figures; not a test.

    .venv/bin/python benchmarks/parse_speed.py [--size-mb 1024] [--dir /var/tmp] [--keep]

Writes a log of a 1024-rank job (128 nodes x 8 GPUs) into a temporary folder: per communicator and
rank the init lines (Bootstrap, NET/IB device list, 'Using network IB', Init START/COMPLETE, nvls
channel count), ring and tree edges (P2P/IPC/read and SHM inside a node, NET/IB/GDRDMA [send] and
[receive] between nodes), ring listings on rank 0, per-collective chatter (NCCL_DEBUG_SUBSYS=COLL),
application lines, and an nccl-tests table with its 1024 'Rank' lines; communicators are created
again and again (as Megatron-style jobs do) until the file reaches the size. Then, in the same run,
it times `hpcbench parse FILE --format json` (in one process, HPCBENCH_PARSE_JOBS=1; the same with the
file read in chunks, not mapped, HPCBENCH_PARSE_MMAP=0, as a file written in the last minute is: the log's
time is set an hour back, as a finished job's; with 2 worker processes; with the default, one process where the C scanner hpcbench/parse/_scan.c is built; and with
the pure-Python passes, HPCBENCH_PARSE_C=0, in one process and by default, which counts idle CPUs) and
`grep -c 'NCCL INFO' FILE`, interleaved, --repeat times (the file is read once before, so all read from
the page cache). The parsers run as an installed hpcbench does, from compiled bytecode: PYTHONDONTWRITEBYTECODE
is taken out of their environment and PYTHONPYCACHEPREFIX points into the temporary folder, and one untimed
round of every mode comes first, which writes the .pyc files (compiling hpcbench's modules costs ~25 ms a run). It prints medians of wall and CPU time (user + system, os.wait4 of the child, which
includes the workers it reaped; on a machine shared with other work the CPU ratio is the steadier
figure), the ratios, the peak RSS of the largest process (ru_maxrss) and of all the parser's processes
together (polled from /proc), and whether every mode wrote the same JSON, byte for byte. The folder is deleted unless
--keep.

With --floor it also times, in the same interleaved runs, what an exact reader cannot do without in
CPython (the pure-Python path's parts; the C scanner does these passes in one): starting `hpcbench parse` (on an
empty file), and, in one process over the log in 2 MiB chunks, reading it, one `re` pass that stops nowhere, one
that stops at every line, one that tests every line's prefix (hpcbench/parse/known.py), the pass that finds the
fact-carrying messages (fastpath.MSG) and comparing those with the ones read before. Their sum is a floor
for a reader built from these parts.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hpcbench.parse.fastpath import C_ENV, _scan
from hpcbench.parse.parallel import JOBS_ENV
from hpcbench.parse.scan import MAP_ENV

REPO = Path(__file__).resolve().parents[1]
NODES, GPUS, CHANNELS = 128, 8, 16


def _rank_block(rank: int, pids: list[int], rng: random.Random, n: int) -> str:
    """One rank's lines for one communicator of ``n`` ranks; '{tid}' and '{op}' are filled per communicator."""
    node, dev = divmod(rank, GPUS)
    host = f"gpu-node-{node:03d}"
    p = f"{host}:{pids[rank]}:{{tid}} [{dev}] NCCL INFO "
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    lines = [
        f"{p}Bootstrap : Using ib0:10.{node // 250}.{node % 250}.{dev + 1}<0>",
        (f"{p}NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; "
         f"OOB ib0:10.0.{node}.1<0>"),
        f"{p}Using network IB",
        (f"{p}ncclCommInitRank comm 0x55d0{rank:04x}{{tid}} rank {rank} nranks {n} cudaDev {dev} nvmlDev {dev} "
         f"busId {dev + 1}b000 commId 0x{{tid}}ab - Init START"),
        f"{p}Setting affinity for GPU {dev} to ffff,0000ffff",
        f"{p}Trees [0] {nxt}/-1/-1->{rank}->{prv} [1] {prv}/-1/-1->{rank}->{nxt}",
        f"{p}P2P Chunksize set to 524288",
    ]
    for c in range(CHANNELS):
        if nxt // GPUS == node:
            how = "SHM/direct/direct" if (dev == 3 and c % 8 == 0) else "P2P/IPC/read"
            lines.append(f"{p}Channel {c:02d}/0 : {rank}[{dev}] -> {nxt}[{nxt % GPUS}] via {how}")
        else:
            lines.append(f"{p}Channel {c:02d}/0 : {rank}[{dev}] -> {nxt}[{nxt % GPUS}] [send] via NET/IB/{c % 4}/GDRDMA")
        if prv // GPUS != node:
            lines.append(f"{p}Channel {c:02d}/0 : {prv}[{prv % GPUS}] -> {rank}[{dev}] [receive] via NET/IB/{c % 4}/GDRDMA")
    lines += [f"{p}Connected all rings", f"{p}Connected all trees",
              f"{p}threadThresholds 8/8/64 | 8192/8/64 | 512 | 512",
              f"{p}{CHANNELS} coll channels, 0 nvls channels, {CHANNELS} p2p channels, 2 p2p channels per peer",
              f"{p}comm 0x55d0{rank:04x}{{tid}} rank {rank} nranks {n} cudaDev {dev} busId {dev + 1}b000 - Init COMPLETE"]
    for k in range(rng.randint(25, 40)):
        lines.append(f"{p}AllReduce: opCount {{op}}{k:x} sendbuff 0x7f3a{rank:04x}0000 recvbuff 0x7f3a{rank:04x}8000 "
                     f"count {1 << (k % 20)} datatype 7 op 0 root 0 comm 0x55d0{rank:04x}{{tid}} [nranks={n}] stream 0x55d1")
    if rank % 97 == 0:
        lines.append(f"[rank{rank}]: iteration {{op}} | loss 2.{rank % 10}31 | lr 3.0E-04 | step time 412.5 ms")
    return "\n".join(lines) + "\n"


def _header(n: int) -> str:
    out = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20",
           "#", "# Using devices"]
    out += [f"#  Rank {r:4d} Group  0 Pid {4000 + r:6d} on gpu-node-{r // GPUS:03d} device  {r % GPUS} [0x1b] NVIDIA H100"
            for r in range(n)]
    return "\n".join(out) + "\n"


def _table() -> str:
    out = ["#                                                              out-of-place                       in-place",
           "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
           "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    for i in range(3, 34):
        size = 1 << i
        t = 20.0 + size / 180e3
        alg = size / t / 1e3
        out.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {t:7.1f}  {alg:6.2f}  {alg * 1.998:6.2f}      0"
                   f"  {t * 1.01:7.1f}  {alg / 1.01:6.2f}  {alg * 1.978:6.2f}      0")
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 187.321", "#"]
    return "\n".join(out) + "\n"


def generate(path: Path, size: int, seed: int = 1, nodes: int = NODES) -> int:
    """The log of a job of ``nodes`` x 8 ranks, at least ``size`` bytes (whole communicators)."""
    rng = random.Random(seed)
    n = nodes * GPUS
    pids = [rng.randint(1000, 4_000_000) for _ in range(n)]
    blocks = [_rank_block(r, pids, rng, n) for r in range(n)]
    listing = "".join(f"gpu-node-000:{pids[0]}:{{tid}} [0] NCCL INFO Channel {c:02d}/{CHANNELS} : "
                      + " ".join(str(r) for r in range(n)) + "\n" for c in range(CHANNELS))
    written = 0
    with open(path, "w") as f:
        f.write("NCCL version 2.21.5+cuda12.4\n")
        f.write(_header(n))
        comm = 0
        while written < size:
            tid = str(rng.randint(100_000, 999_999))
            op = f"{comm:x}"
            parts = [listing.replace("{tid}", tid)]
            order = list(range(n))
            # ranks of one node print together, nodes interleave, as an srun/mpirun stdout does
            rng.shuffle(order)
            parts += [blocks[r].replace("{tid}", tid).replace("{op}", op) for r in order]
            text = "".join(parts)
            f.write(text)
            written += len(text)
            comm += 1
            if comm == 3:
                f.write(_table())
    return path.stat().st_size


LOGS = REPO / "tests" / "data" / "logs"
_PLAIN_LINE = re.compile(r"[\w.-]+:\d+:\d+ \[\d+\] NCCL INFO (.+)")
_EDGE_MSG = re.compile(r"(Channel|Ring) \d+(?:/\d+)? : \d+(?:\[[^\]]*\])? -> \d+(?:\[[^\]]*\])?((?: \[(?:send|receive)\])? via .+)")
_INIT_MSG = re.compile(r"(.*?comm )0x[0-9a-fA-F]+( rank )\d+( nranks )\d+(.*)")
_TAG = re.compile(r"^\[\d+(?:,\d+)?\]<std(?:out|err)>:")
_NOT_A_PRINT = re.compile(r"[\w.-]+:\d+:\d+ |NCCL|^\s*$")  # an NCCL line (any release) or a blank one


def corpus_lines() -> tuple[list[str], list[str], list[str], list[str]]:
    """From the real logs of tests/data/logs: the messages of their plain NCCL INFO lines, as edges ("via"),
    init lines and the rest; and the training prints of their DDP and Horovod logs (Horovod's "Iter #3:
    601.7 img/sec per GPU", "Running benchmark...", torchrun's notices, ...)."""
    from hpcbench.parse.prefixes import continues

    edges, inits, rest, prints = set(), set(), set(), set()
    for f in sorted(LOGS.glob("*.log")):
        raw = f.read_text(encoding="utf-8", errors="replace").splitlines()
        for k, line in enumerate(raw):
            if k and continues(raw[k - 1], line, len(raw[k - 2]) if k > 1 else 0):
                continue  # the rest of a hard-wrapped line (ddp_7.log), not a print
            line = _TAG.sub("", line.strip()).strip()
            if (m := _PLAIN_LINE.fullmatch(line)) is not None:
                msg = m.group(1)
                if _NOT_A_PRINT.match(msg) or "NCCL " in msg:
                    continue  # another rank's line glued on, "NCCL version": printed once, not per communicator
                (edges if _EDGE_MSG.fullmatch(msg) else inits if _INIT_MSG.fullmatch(msg) else rest).add(msg)
            elif f.name.startswith(("ddp_", "horovod_")) and len(line) <= 120 and line.isascii() and not _NOT_A_PRINT.search(line):
                prints.add(line)
    return sorted(edges), sorted(inits), sorted(rest), sorted(prints)


def _real_block(rank: int, n: int, pid: int, rng: random.Random, real: tuple[list[str], list[str], list[str]]) -> str:
    """One rank's lines for one communicator of ``n`` ranks, made of real messages: a dozen of the corpus's
    other messages, one of its init lines and 16 of its edge lines, with this rank's host, rank, peer and
    comm pointer put in ('{tid}' is filled per communicator)."""
    edges, inits, rest = real
    node, dev = divmod(rank, GPUS)
    nxt = (rank + 1) % n
    p = f"gpu-node-{node:03d}:{pid}:{{tid}} [{dev}] NCCL INFO "
    lines = [p + m for m in rng.sample(rest, 12)]
    a, b, c, d = _INIT_MSG.fullmatch(rng.choice(inits)).groups()  # type: ignore[union-attr]
    lines.append(f"{p}{a}0x55d0{rank:04x}{{tid}}{b}{rank}{c}{n}{d}")
    for ch in range(CHANNELS):
        kind, via = _EDGE_MSG.fullmatch(edges[(rank * CHANNELS + ch) % len(edges)]).groups()  # type: ignore[union-attr]
        lines.append(f"{p}{kind} {ch:02d}/0 : {rank}[{dev}] -> {nxt}[{nxt % GPUS}]{via}")
    return "\n".join(lines)


def interleaved(path: Path, size: int, seed: int = 1, nodes: int = NODES, share: float = 0.007) -> int:
    """The log of a job of ``nodes`` x 8 ranks, at least ``size`` bytes, from real lines (corpus_lines): each
    communicator's NCCL lines, ranks of one node together and nodes interleaved, with the training's own
    prints after ``share`` of the lines, as a job's stdout mixes them; at the end, hpcbench's own summary
    line, as a point's job log ends (workloads/summary.py)."""
    from hpcbench.workloads import summary

    rng = random.Random(seed)
    edges, inits, rest, prints = corpus_lines()
    n = nodes * GPUS
    pids = [rng.randint(1000, 4_000_000) for _ in range(n)]
    blocks = [_real_block(r, n, pids[r], rng, (edges, inits, rest)) for r in range(n)]
    written = 0
    with open(path, "w") as f:
        while written < size:
            tid = str(rng.randint(100_000, 999_999))
            order = list(range(n))
            rng.shuffle(order)
            lines = "\n".join(blocks[r] for r in order).replace("{tid}", tid).split("\n")
            out = []
            for line in lines:
                out.append(line)
                if rng.random() < share:
                    out.append(rng.choice(prints))
            text = "\n".join(out) + "\n"
            f.write(text)
            written += len(text)
        f.write(summary.lines(f"hvd-gloo-resnet50-b32-n{nodes}x{GPUS}", summary.train(61234.5, 0.535, n), {})[0] + "\n")
    return path.stat().st_size


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants (worker processes), from /proc."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:")), 0)
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass
    return total


def _timed(cmd: list[str], out, env: dict[str, str] | None = None) -> tuple[float, float, int, int, int]:
    """Wall s, CPU s (user + system of the child and the workers it reaped: steadier than wall on a
    shared machine), peak RSS of its largest process and of its whole tree (KiB), exit code."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, cwd=REPO, env=env)
    peak = [0]
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], _tree_rss_kib(proc.pid))

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    done.set()
    t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return dt, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, peak[0], proc.returncode


def _floor_passes(log: Path) -> dict[str, float]:
    """CPU seconds of each pass over ``log`` in 2 MiB chunks, in this process: reading, then each pass
    on its own, beyond reading."""
    import re

    from hpcbench.parse import fastpath

    known = fastpath.Known()
    known.hosts = {f"gpu-node-{i:03d}".encode() for i in range(NODES)}
    known._dirty = True
    known.compiled()
    seen = fastpath.Seen()
    passes = {
        "re: a pass that stops nowhere": re.compile(rb"\x01").findall,
        "re: a pass that stops at every line": re.compile(rb"\n").findall,
        "re: every line's prefix (known.Known.other)": known.other.findall,
        "re: the fact-carrying messages (fastpath.MSG)": fastpath.MSG.findall,
        # as the fast path does it: set lookups, and the keys of the init lines, each new
        "those messages compared with the ones read": lambda msgs: fastpath._fresh(b"", [], msgs, seen),
    }
    out = {"read 2 MiB chunks": 0.0, **dict.fromkeys(passes, 0.0)}
    with open(log, "rb") as f:
        while True:
            t0 = time.process_time()
            data = f.read(2 << 20)
            out["read 2 MiB chunks"] += time.process_time() - t0
            if not data:
                return out
            for name, work in passes.items():
                arg = fastpath.MSG.findall(data) if name.startswith("those") else data
                t0 = time.process_time()
                work(arg)
                out[name] += time.process_time() - t0


def _env(tmp: Path, **more: str) -> dict[str, str]:
    """The parsers' environment: this checkout's hpcbench, its bytecode written once and read after (under
    ``tmp``), as an installed package's is."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return dict(env, PYTHONPATH=str(REPO), PYTHONPYCACHEPREFIX=str(tmp / "pycache"), **more)


def _floor(tmp: Path, log: Path, floors: dict[str, list[float]]) -> None:
    """One run of each floor figure (see the module's docstring)."""
    env = _env(tmp)
    (tmp / "empty.log").write_bytes(b"")
    with open(os.devnull, "w") as null:
        start = _timed([sys.executable, "-m", "hpcbench", "parse", str(tmp / "empty.log")], null, env)[1]
    got = json.loads(subprocess.run([sys.executable, __file__, "--floor-of", str(log)], env=env, cwd=REPO,
                                    capture_output=True, text=True, check=True).stdout)
    for name, cpu in {"start hpcbench parse (empty file)": start, **got}.items():
        floors.setdefault(name, []).append(cpu)


def _print_floor(floors: dict[str, list[float]], g_cpu: float) -> None:
    med = {k: median(v) for k, v in floors.items()}
    for k, v in med.items():
        print(f"  {k}: {v:.2f} s CPU ({v / g_cpu:.1f}x grep)")
    fixed = med["start hpcbench parse (empty file)"] + med["read 2 MiB chunks"]
    stops = fixed + med["re: a pass that stops at every line"]
    print(f"floor of any reader that acts on every line with re: start + read + a pass that stops at every line = "
          f"{stops:.2f} s CPU, {stops / g_cpu:.1f}x grep, before a host is tested or a message read")
    design = fixed + med["re: every line's prefix (known.Known.other)"] + sum(
        med[k] for k in ("re: the fact-carrying messages (fastpath.MSG)", "those messages compared with the ones read"))
    print(f"floor of the fast path's parts: start + read + each line's prefix + messages found and compared = "
          f"{design:.2f} s CPU, {design / g_cpu:.1f}x grep (the line path for new lines and the bookkeeping come on top)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command; medians are reported")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--floor", action="store_true", help="also time the passes an exact reader needs")
    ap.add_argument("--floor-of", help=argparse.SUPPRESS)  # the child that times them on this log
    ap.add_argument("--log", choices=("synthetic", "interleaved"), default="synthetic",
                    help="synthetic: the 1024-rank log above; interleaved: real NCCL lines of tests/data/logs "
                         "expanded to 1024 ranks, with real training prints after --prints of the lines")
    ap.add_argument("--prints", type=float, default=0.007, help="with --log interleaved: the share of lines "
                    "followed by a training print (default 0.007)")
    args = ap.parse_args()
    if args.floor_of:
        print(json.dumps(_floor_passes(Path(args.floor_of))))
        return
    tmp = Path(tempfile.mkdtemp(prefix="hpcbench-parse-speed-", dir=args.dir))
    try:
        log = tmp / "nccl_1024ranks.log"
        t0 = time.perf_counter()
        # in a child process: this one stays small, and so do the parsers forked from it (a forked
        # child's ru_maxrss counts the memory it had before exec)
        make, more = (generate, ()) if args.log == "synthetic" else (interleaved, (1, NODES, args.prints))
        gen = multiprocessing.get_context("fork").Process(target=make, args=(log, args.size_mb << 20, *more))
        gen.start()
        gen.join()
        size = log.stat().st_size
        print(f"generated {log} ({size / 1e9:.2f} GB) in {time.perf_counter() - t0:.1f} s")
        # as the log of a job that ended: hpcbench maps a big file not written for a minute (parse/scan.py), and
        # reads one written just now in chunks (the mode "chunks" below)
        os.utime(log, (time.time() - 3600, time.time() - 3600))
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} before the runs; C scanner "
              + ("built" if _scan is not None else "NOT built (pip install -e . where a C compiler is): all modes are pure Python"))
        parse = [sys.executable, "-m", "hpcbench", "parse", str(log), "--format", "json"]
        # the default is one process where the C scanner is built; the pure-Python passes (HPCBENCH_PARSE_C=0)
        # pick worker processes by idle CPUs (one process on a busy machine)
        modes = [("1 process", "1", ""), ("1 process, read in chunks (not mapped)", "1", "", "0"), ("2 workers", "2", ""),
                 ("default", "", ""), ("pure Python, 1 process", "1", "0"), ("pure Python, default", "", "0")]
        runs: dict[str, list[tuple[float, float, int, int, int]]] = {"grep": []}
        runs.update({m[0]: [] for m in modes})
        floors: dict[str, list[float]] = {}
        outs = {m[0]: tmp / f"parsed-{k}.json" for k, m in enumerate(modes)}
        for k in range(args.repeat + 1):  # interleaved, so a burst of load elsewhere hits all alike
            warm_up = k == 0  # untimed: writes the .pyc files every later run reads
            # grep's output goes to a file: with stdout on /dev/null GNU grep stops at the first match.
            with open(tmp / "grep.out", "w") as gout:
                g = _timed(["grep", "-c", "NCCL INFO", str(log)], gout)
            if not warm_up:
                runs["grep"].append(g)
            for mode, jobs, compiled, *mapped in modes:
                with open(outs[mode], "w") as o:
                    r = _timed(parse, o, _env(tmp, **{JOBS_ENV: jobs, C_ENV: compiled, MAP_ENV: "".join(mapped)}))
                if r[4] != 0:
                    sys.exit(f"hpcbench parse ({mode}) failed with exit code {r[4]}")
                if not warm_up:
                    runs[mode].append(r)
            if args.floor and not warm_up:
                _floor(tmp, log, floors)
        raw = {mode: p.read_bytes() for mode, p in outs.items()}
        differ = [mode for mode, d in raw.items() if d != raw[modes[0][0]]]  # byte for byte
        doc = json.loads(raw[modes[0][0]])[0]
        nccl = doc["nccl"]
        g_dt, g_cpu = median(r[0] for r in runs["grep"]), median(r[1] for r in runs["grep"])
        print(f"grep -c 'NCCL INFO': {g_dt:.2f} s wall, {g_cpu:.2f} s CPU, "
              f"{(tmp / 'grep.out').read_text().strip()} lines ({size / g_dt / 1e9:.2f} GB/s)  [median of {args.repeat}, "
              "after an untimed round that wrote the parsers' .pyc files]")
        for mode, *_ in modes:
            rs = runs[mode]
            dt, cpu = median(r[0] for r in rs), median(r[1] for r in rs)
            rss = max(r[2] for r in rs)
            tree = max(rss, *(r[3] for r in rs))  # polling can miss a peak the kernel saw
            print(f"hpcbench parse, {mode}: {dt:.2f} s wall ({size / dt / 1e6:.0f} MB/s), {cpu:.2f} s CPU; "
                  f"peak RSS {rss / 1024:.0f} MB largest process, {tree / 1024:.0f} MB all processes")
            print(f"  ratio parse/grep: {dt / g_dt:.2f} wall, {cpu / max(g_cpu, 1e-3):.2f} CPU "
                  f"(goal <= 3 in one process; peak RSS goal <= 200 MB)  [walls {', '.join(f'{r[0]:.1f}' for r in rs)} s]")
        print("every mode wrote the same JSON, byte for byte" if not differ else f"DIFFERENT JSON from: {', '.join(differ)}")
        print(f"found: {len(nccl['hosts'])} hosts, nranks {nccl['nranks']}, transports {nccl['transports']}, "
              f"{len(nccl['edges'])} distinct edges, network {nccl['network']}, "
              f"nccl-tests avg {doc['nccl_tests'] and doc['nccl_tests']['avg_busbw']}")
        if floors:
            _print_floor(floors, max(g_cpu, 1e-3))
        print(f"machine: load average {os.getloadavg()[0]:.1f} after the runs")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
