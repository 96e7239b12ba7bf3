"""Verbs about this node and the site: data, env, doctor, minicluster."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hpcbench.cli.common import Args, echo, profile_arg
from hpcbench.errors import ConfigError


def cmd_data(args: Args) -> int:
    from hpcbench.workloads.data import fetch

    dest = fetch(args.name, args.dest)
    echo(f"{args.name} is in {dest}; set workload.data = \"{args.name}\" and workload.data_dir = \"{dest}\"")
    return 0


def args_data(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("fetch",))
    p.add_argument("name", choices=("mnist", "cifar10"))
    p.add_argument("--dest", required=True, help="folder to download into; the sweep's workload.data_dir")


def cmd_env(args: Args) -> int:
    from hpcbench.ops.env import report

    print(report(args.format), end="")
    return 0


def args_env(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), default="table")


def cmd_doctor(args: Args) -> int:
    import json

    if args.gpu:
        return _doctor_gpu(args)
    from hpcbench.ops import doctor
    from hpcbench.plan import cluster

    args.json = args.json or args.format == "json"
    profile = cluster.load(profile_arg(args.cluster)) if args.cluster else None
    if profile is not None and not args.json:
        echo(f"cluster profile {profile.name} ({profile.source})")
    findings = doctor.run(profile, Path(args.runs_root), job=not args.no_job, timeout_s=args.timeout,
                          echo=None if args.json else echo)
    print(json.dumps(doctor.to_json(findings), indent=2) if args.json else doctor.format_findings(findings),
          end="\n" if args.json else "")
    return 1 if any(f.fails for f in findings) else 0


def _doctor_gpu(args: Args) -> int:
    import json

    from hpcbench.ops import gpurun

    as_json = args.json or args.format == "json"
    keep = Path(args.keep) if args.keep else None
    report = gpurun.run(Path(args.sys_root), train=not args.no_training, workdir=keep,
                        echo=None if as_json else echo)
    if keep is not None:
        from hpcbench.files import atomic_write_json

        atomic_write_json(keep / "doctor-gpu.json", report.to_dict())
    print(json.dumps(report.to_dict(), indent=2) if as_json else gpurun.format_text(report), end="\n" if as_json else "")
    return 1 if report.failed else 0


def args_doctor(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", default=os.environ.get("HPCBENCH_CLUSTER") or None,
                   help="also check a cluster profile (partition, srun --mpi plugin, modules); default: $HPCBENCH_CLUSTER")
    p.add_argument("--runs-root", default="runs", help="where run directories will go (default: runs)")
    p.add_argument("--no-job", action="store_true",
                   help="do not submit the probe job; judge the run directory by its filesystem type only")
    p.add_argument("--timeout", type=float, default=120, help="seconds to wait for the probe job (default: 120)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or JSON")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    g = p.add_argument_group("GPU node (--gpu)")
    g.add_argument("--gpu", action="store_true",
                   help="check this node's GPUs instead: identity, PCIe, copies, matmul, memory, a DDP/NCCL training "
                        "run against a bare loop, NVLink/P2P (about 2 minutes; exit 2 without a GPU)")
    g.add_argument("--no-training", action="store_true", help="--gpu without the training comparison (about 10 s)")
    g.add_argument("--keep", metavar="DIR", help="--gpu: keep the training runs' logs and records, and the report as doctor-gpu.json, in DIR")
    g.add_argument("--sys-root", default="/sys", help=argparse.SUPPRESS)  # a copied sysfs tree


def cmd_minicluster(args: Args) -> int:
    from hpcbench.ops import minicluster

    root = Path(args.dir)
    rc = 0
    if args.action == "up":
        lines = minicluster.up(root, args.nodes, args.link, args.restart)
    elif args.action == "down":
        lines = minicluster.down(root)
    elif args.action in ("degrade", "restore"):
        if not args.node:
            raise ConfigError(f"minicluster {args.action} needs a node: hpcbench minicluster {args.action} node2 ...")
        lines = (minicluster.degrade(root, args.node, args.link, args.cpu) if args.action == "degrade"
                 else minicluster.restore(root, args.node))
    else:
        ok, lines = minicluster.status(root)
        rc = 0 if ok else 1
    for line in lines:
        echo(line)
    return rc


def args_minicluster(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("up", "down", "status", "degrade", "restore"))
    p.add_argument("node", nargs="?", help="degrade/restore: which node (node1, node2, ...)")
    # ops.minicluster.DEFAULT_DIR, without importing it for --help
    default = os.environ.get("HPCBENCH_MINICLUSTER_DIR", "/var/tmp/hpcbench-minicluster")
    p.add_argument("--dir", default=default,
                   help=f"state, config and logs (default: $HPCBENCH_MINICLUSTER_DIR or {default})")
    p.add_argument("--nodes", type=int, default=2, help="up: how many nodes, 1 to 8 (default: 2)")
    p.add_argument("--link", help="up: every node's link rate, e.g. 1gbit or 100mbit (default: unshaped); "
                                  "degrade: the node's new rate")
    p.add_argument("--cpu", type=float, help="degrade: the share of its CPU time the node keeps (0-1], a CFS quota")
    p.add_argument("--restart", action="store_true",
                   help="up: replace a running cluster of another shape (cancels every job on it)")


def cmd_hunt(args: Args) -> int:
    from hpcbench.hunt import record
    from hpcbench.hunt.run import HuntSettings, hunt
    from hpcbench.plan import cluster as cluster_mod
    from hpcbench.rundir import RunDir
    from hpcbench.workloads.distenv import expand_hostlist

    for flag, value in (("--rounds", args.rounds), ("--bytes", args.bytes), ("--repeats", args.repeats),
                        ("--nodes-count", args.nodes_count)):
        if value is not None and value < 1:
            raise ConfigError(f"hunt {flag} {value}: must be 1 or more", f"give {flag} a positive number")
    profile = cluster_mod.load(profile_arg(args.cluster)) if args.cluster else None
    settings = HuntSettings(
        nodes=tuple(expand_hostlist(args.nodes)) if args.nodes else (), count=args.nodes_count,
        partition=args.partition or (profile.get("partition") if profile else None), rounds=args.rounds,
        nbytes=args.bytes, repeats=args.repeats, backend=args.backend, env=profile.env if profile else ())
    h = hunt(settings)
    out = Path(args.out) if args.out else RunDir.default_path(Path(args.runs_root), "hunt")
    path = record.write(h, out)
    doc = record.read(path)
    v = h.verdict
    per_round = ", ".join(f"{t:.1f}" for t in h.round_seconds)
    echo(f"hunt over {len(h.allocation.nodes)} nodes ({', '.join(h.allocation.nodes)}), job {h.allocation.job_id}: "
         f"{h.rounds_used} round(s) in {h.seconds:.0f} s (seconds per round: {per_round})")
    echo(f"pairs: median {v.bandwidth.median / 1e6:.3g} MB/s (robust sd {v.bandwidth.mad / 1e6:.2g}), small "
         f"allreduce {v.latency.median * 1e6:.0f} us; compute probe: median {v.probe.median:.3g} s")
    for n in h.notes:
        echo(n)
    for f in h.failures:
        echo(f"could not measure: {f}")
    for s in v.suspects:
        where = f"{s.node}-{s.partner}" if s.partner else s.node
        echo(f"suspect {where}: {s.kind} (confidence {s.confidence:.2f}): {s.evidence}")
    if v.healthy:
        echo("no suspect: every pair and probe is within the spread of the others")
    else:
        echo(f"keep them out: hpcbench sweep SWEEP --exclude-nodes @{path}")
    if not args.no_plots:
        from hpcbench.report.huntplot import pair_matrix

        echo(f"pair matrix: {pair_matrix(doc, path)}")
    echo(f"wrote {path}")
    return 0 if v.healthy and not h.failures else 1


def args_hunt(p: argparse.ArgumentParser) -> None:
    from hpcbench.hunt.schedule import ROUNDS

    p.add_argument("--nodes", help="the nodes to hunt among, a Slurm host list such as node[1-8] (default: the "
                                   "allocation this runs in)")
    p.add_argument("--nodes-count", type=int, metavar="N", help="allocate N nodes (with --partition) instead")
    p.add_argument("--partition", help="partition to allocate in (default: the cluster profile's)")
    p.add_argument("--cluster", default=os.environ.get("HPCBENCH_CLUSTER") or None,
                   help="cluster profile whose [env] the pair tests use (interfaces, MPI settings)")
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds of pairs after round 0 shows a problem "
                                                              f"(default {ROUNDS}; all pairs: nodes - 1)")
    p.add_argument("--bytes", type=int, default=8 << 20, help="message size of the bandwidth test (default 8 MiB)")
    p.add_argument("--repeats", type=int, default=3, help="measurements per pair and probe (default 3)")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                   help="auto: NCCL where there are GPUs, else Gloo")
    p.add_argument("--out", help="folder for hunt.json and the pair matrix (default: RUNS_ROOT/hunt-<UTC time>)")
    p.add_argument("--runs-root", default="runs")
    p.add_argument("--no-plots", action="store_true")
