"""``hpcbench env``: this node's capabilities and provenance, as a table or as JSON."""

from __future__ import annotations

import json
from typing import Any

from hpcbench.tabular import format_table
from hpcbench.vocab import BACKENDS, DEVICES, FRAMEWORKS, NO_FRAMEWORK

COMBOS = [(f, b, d) for f in FRAMEWORKS if f != NO_FRAMEWORK for b in BACKENDS for d in DEVICES
          if not (b == "nccl" and d == "cpu")] + [(NO_FRAMEWORK, "-", d) for d in DEVICES]


def gather() -> dict[str, Any]:
    from hpcbench.plan.limits import unavailable
    from hpcbench.workloads import provenance
    from hpcbench.workloads.capabilities import detect
    from hpcbench.workloads.distenv import from_environ

    try:
        env = from_environ()
        rank, local = env.rank, env.local_rank
    except (RuntimeError, ValueError, OSError):  # a half-set launcher environment: describe this process alone
        rank, local = 0, 0
    caps = detect()
    backends = [{"framework": f, "backend": b, "device": d, "runs_here": (why := unavailable(f, b, d, caps)) is None,
                 "reason": why} for f, b, d in COMBOS]
    return {"capabilities": caps.to_dict(), "backends": backends,
            "provenance": provenance.collect(rank, local, topology=True)}


def _yes(ok: bool | None, why: str | None = None) -> str:
    return "yes" if ok else ("no" + (f" ({why})" if why else ""))


def _kv(title: str, pairs: list[tuple[str, Any]]) -> str:
    """A titled two-column table, indented under its title (tabulate's plain layout)."""
    from tabulate import tabulate

    rows = [(k, "-" if v is None or v == "" else v) for k, v in pairs]
    body = tabulate(rows, tablefmt="plain", disable_numparse=True) if rows else ""
    return f"{title}\n" + "".join(f"  {line.rstrip()}\n" for line in body.splitlines())


def _words(*parts: Any) -> str:
    return " ".join(str(p) for p in parts if p not in (None, ""))


def render(info: dict[str, Any]) -> str:
    caps, prov = info["capabilities"], info["provenance"]
    reasons = caps["reasons"]
    aff, sw = prov["affinity"], prov["software"]
    dist = ", ".join(f"{k} {_yes(v, None)}" for k, v in caps["dist_backends"].items())
    hb = caps["horovod_build"] or {}
    parts = [
        (f"hpcbench env: {prov['slurm_node'] or prov['hostname']} (host {prov['hostname']}), "
         f"rank {prov['rank']}, local rank {prov['local_rank']}\n"),
        _kv("software", [("python", caps["python"]), ("torch", caps["torch"] or reasons.get("torch")),
                         ("torchvision", caps["torchvision"] or reasons.get("torchvision")),
                         ("horovod", caps["horovod"] or reasons.get("horovod")), ("MPI", sw["mpi"]),
                         ("CUDA (torch build)", caps["cuda_version"]), ("NCCL", prov["nccl"]),
                         ("GPU driver", prov["driver"]), ("OS", sw["os"]), ("kernel", sw["kernel"]),
                         ("hpcbench commit", prov["git_commit"])]),
        _kv("communication", [("torch.distributed", dist),
                              ("horovod controllers", ", ".join(caps["horovod_controllers"]) or None),
                              ("horovod tensor ops", ", ".join(caps["horovod_tensor_ops"]) or None),
                              ("horovod build", ", ".join(f"{k}={v}" for k, v in hb.items()) or None)]),
        "which framework/backend/device runs here\n" + format_table(
            [{**b, "runs_here": _yes(b["runs_here"])} for b in info["backends"]],
            ("framework", "backend", "device", "runs_here", "reason")) + "\n",
        _kv("hardware and binding", [
            ("CUDA devices", caps["cuda_devices"]),
            *[(f"GPU {g['index']}", f"{g['name']} bus {g['bus_id']} {g['memory_mib']} MiB") for g in prov["gpus"]],
            ("CPU affinity", ",".join(map(str, aff["cpus"]))), ("sockets", ",".join(map(str, aff["sockets"]))),
            ("NUMA nodes", ",".join(map(str, aff["numa_nodes"]))), ("binding requested", aff["requested"]),
            ("binding matches", f"{aff['matches']} ({aff['detail']})"),
            *[(f"NIC {n['name']}", _words(n["kind"], n["model"], n["speed"] and f"{n['speed']} Mb/s", n["state"]))
              for n in prov["nics"]],
            *[(f"IB {d['name']}", _words(d["hca_type"], d["fw_ver"] and f"fw {d['fw_ver']}", "ports",
                                         ", ".join(f"{p['port']}: {p['state']} {p['rate']}" for p in d["ports"])))
              for d in prov["infiniband"]["devices"]],
        ]),
    ]
    if prov["topology"]:
        parts.append("nvidia-smi topo -m\n" + prov["topology"].rstrip() + "\n")
    if prov["env"]:
        parts.append(_kv("environment", sorted(prov["env"].items())))
    parts.append(_kv("unavailable", sorted({**{f"capabilities.{k}": v for k, v in reasons.items()},
                                            **prov["unavailable"]}.items())))
    return "\n".join(parts)


def report(fmt: str = "table") -> str:
    info = gather()
    return json.dumps(info, indent=2) + "\n" if fmt == "json" else render(info)
