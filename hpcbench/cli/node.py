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

    from hpcbench.ops import doctor
    from hpcbench.plan import cluster

    profile = cluster.load(profile_arg(args.cluster)) if args.cluster else None
    if profile is not None and not args.json:
        echo(f"cluster profile {profile.name} ({profile.source})")
    findings = doctor.run(profile, Path(args.runs_root), job=not args.no_job, timeout_s=args.timeout,
                          echo=None if args.json else echo)
    print(json.dumps(doctor.to_json(findings), indent=2) if args.json else doctor.format_findings(findings),
          end="\n" if args.json else "")
    return 1 if any(f.fails for f in findings) else 0


def args_doctor(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", default=os.environ.get("HPCBENCH_CLUSTER") or None,
                   help="also check a cluster profile (partition, srun --mpi plugin, modules); default: $HPCBENCH_CLUSTER")
    p.add_argument("--runs-root", default="runs", help="where run directories will go (default: runs)")
    p.add_argument("--no-job", action="store_true",
                   help="do not submit the probe job; judge the run directory by its filesystem type only")
    p.add_argument("--timeout", type=float, default=120, help="seconds to wait for the probe job (default: 120)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")


def cmd_minicluster(args: Args) -> int:
    from hpcbench.ops import minicluster

    root = Path(args.dir)
    rc = 0
    if args.action == "up":
        lines = minicluster.up(root, args.nodes, args.link)
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
