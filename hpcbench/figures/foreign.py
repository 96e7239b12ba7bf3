"""Logs of jobs hpcbench did not launch -> Samples: what each log shows, and what had to be inferred, said.

A log is its own point. It joins a curve with other logs only when they are comparable: the same
framework, model, batch, precision and cluster. The cluster of a log is the host family of its host
names (gpu-node-017 -> gpu-node-#), or the --cluster the user gives; a log that shows no host name
cannot be placed on anyone's curve, and its row says so. A log that holds no measurement at all
(NCCL lines only) is evidence for the transport table, not a point: it is listed as not measured.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench.errors import HpcbenchError
from hpcbench.figures.samples import Sample, from_record
from hpcbench.parse.evidence import ranks_named
from hpcbench.records import AllreduceRow, ResultRecord
from hpcbench.vocab import NO_RESULT, NOT_MEASURED, PARSED, UNPARSABLE

if TYPE_CHECKING:
    from hpcbench.parse.api import Log

_MODEL = re.compile(r"\bModel: (\S+)")
_BATCH = re.compile(r"\bBatch size: (\d+)")
# fp16 as the Horovod and tf_cnn benchmarks are told it: --fp16-allreduce, --use_fp16, --precision fp16, --amp
_FP16 = re.compile(r"--fp16[-_]allreduce|--use_fp16(?:=True)?\b|--precision[= ](?:fp16|half|bf16)|--amp\b")


def host_family(hosts: list[str] | tuple[str, ...]) -> str | None:
    """gpu-node-017, gpu-node-018 -> 'gpu-node-#': what the hosts of one cluster have in common."""
    families = sorted({re.sub(r"\d+", "#", h) for h in hosts})
    return "+".join(families) if families else None


def log_samples(path: Path, notes: list[str]) -> list[Sample]:
    from hpcbench.parse.api import read_log

    return infer(read_log(path), path, notes)


def _topology(parsed: dict[str, Any]) -> tuple[list[str], int | None, list[str]]:
    """(hosts, ranks, how we know) from the NCCL and nccl-tests lines."""
    nccl = parsed.get("nccl") or {}
    hosts, nranks, how = parsed.get("hosts") or nccl.get("hosts") or [], nccl.get("nranks"), []
    if hosts:
        how.append(f"{len(hosts)} host(s) from NCCL/nccl-tests lines ({', '.join(hosts[:4])}"
                   f"{', ...' if len(hosts) > 4 else ''})")
    if nranks:
        how.append(f"{nranks} ranks from NCCL's nranks")
    return hosts, nranks, how


def _layout(nodes: int | None, world: int | None) -> int | None:
    return world // nodes if nodes and world and world % nodes == 0 else None


def _records(log: Log, path: Path) -> list[Sample]:
    out = []
    for n, doc in enumerate(log.facts.get("records") or []):
        try:
            out.append(from_record(ResultRecord.from_dict(doc, f"{path} record {n}"), str(path), parsed=[log]))
        except (HpcbenchError, TypeError, KeyError) as e:
            out.append(Sample(source=str(path), label=f"{path.name}#{n}", state=UNPARSABLE, ok=False, final=True,
                              reason=str(e)))
    return out


def _horovod(hvd: dict[str, Any], head: str, nranks: int | None, how: list[str], base: dict[str, Any]) -> Sample:
    world = hvd.get("ranks") or nranks
    total = hvd.get("total_img_sec")
    m, b = _MODEL.search(head), _BATCH.search(head)
    # lower case, so "ResNet50" from one benchmark and "resnet50" from another are one model
    model, batch = (m.group(1).lower() if m else "?"), (int(b.group(1)) if b else None)
    device = (hvd.get("device") or "GPU").upper()
    said = list(how) + ([f"{world} {_ranks_from(device, hvd.get('ranks_source') or '')}"] if hvd.get("ranks") else [])
    said += [f"model {model} from 'Model:'"] * bool(m) + [f"batch {batch}/{device} from 'Batch size:'"] * bool(b)
    if hvd.get("total_img_sec_err") is not None:
        said.append("± is Horovod's '+-' (1.96 × std over its iterations)")
    return Sample(state=PARSED if total else NO_RESULT, ok=bool(total),
                  framework="horovod", model=model, batch_size=batch, world_size=world,
                  ranks_per_node=_layout(base["nodes"], world), device="cpu" if device == "CPU" else "cuda",
                  throughput=total,
                  # Horovod's benchmark prints +-1.96 sigma of its per-iteration rates: a 95% spread
                  throughput_ci95=hvd.get("total_img_sec_err"),
                  step_time_s=(batch * world / total) if (total and batch and world) else None,
                  reason="" if total else _no_total(hvd), inferred="; ".join(said), **base)


def _no_total(hvd: dict[str, Any]) -> str:
    run = hvd.get("unfinished")
    if run:
        return (f"Horovod printed {run['iterations']} iteration(s) (last {run['last_img_sec']:g} img/sec) and no "
                "'Total img/sec' summary: cut short, or still running?")
    return "Horovod output without a 'Total img/sec on N GPU(s)' line (cut short, or still running?)"


def _ranks_from(device: str, source: str) -> str:
    """What Horovod's rank count was read from (hpcbench.parse.horovod)."""
    return {"total line": f"{device}s from 'Total img/sec on N {device}(s)'",
            "number line": f"{device}s from 'Number of {device}s: N'"}.get(source, "ranks from the launcher's -np N")


def _nccl_tests(tests: dict[str, Any], head: str, nranks: int | None, how: list[str], base: dict[str, Any]) -> Sample:
    rows = [_allreduce_row(r, tests.get("collective") or "all_reduce") for r in tests.get("rows") or []]
    ranks_seen = ranks_named(head)
    world = nranks or ranks_seen or None
    said = list(how) + ([f"{ranks_seen} ranks from nccl-tests 'Rank N ... on HOST' lines"] if ranks_seen else [])
    collective = tests.get("collective")
    said += [] if collective else ["collective all_reduce: the log names none (no command line or test name)"]
    # a header whose rows are not in the text is an excerpt (a paste cut before the table), not a job that
    # stopped: nothing measured, said as such (explain's rule 'no-rows'), never blamed on the job
    return Sample(state=PARSED if rows else NOT_MEASURED, ok=bool(rows), kind="collective", collective=collective or
                  "all_reduce", framework="nccl-tests", model=collective or "all_reduce", device="cuda",
                  world_size=world, ranks_per_node=_layout(base["nodes"], world), allreduce=rows,
                  reason="" if rows else "nccl-tests header without data rows in the text", inferred="; ".join(said),
                  **base | {"backend": "nccl"})


def _printed_by(tests: dict[str, Any], records: list[Sample]) -> bool:
    """Whether the table is a record's own print (hpcbench.workloads.collective writes both): same sizes."""
    sizes = [int(r["size"]) for r in tests.get("rows") or []]
    return bool(sizes) and any([r.size_bytes for r in s.allreduce] == sizes for s in records)


def infer(log: Log, path: Path, notes: list[str]) -> list[Sample]:
    """Samples shown by one log as hpcbench.parse read it."""
    parsed, head = log.facts, log.head
    out = _records(log, path)
    hosts, nranks, how = _topology(parsed)
    nccl = parsed.get("nccl") or {}
    base: dict[str, Any] = {"source": str(path), "label": path.name, "final": True, "nodes": len(hosts) or None,
                            "hosts": tuple(hosts), "backend": "nccl" if nccl else "?", "parsed": [log],
                            "logs": [path], "cluster": host_family(hosts), "precision": _precision(head)}
    if parsed.get("horovod"):
        out.append(_horovod(parsed["horovod"], head, nranks, how, base))
    tests = parsed.get("nccl_tests")
    if tests is not None and _printed_by(tests, out):
        notes.append(f"{path.name}: its nccl-tests-format table is the print of the hpcbench record beside it "
                     f"(the collective workload's output): read once, from the record")
    elif tests is not None:
        out.append(_nccl_tests(tests, head, nranks, how, base))
    if not out:
        what = "NCCL lines only: see the transport table" if nccl else "no measurement hpcbench can read"
        out.append(Sample(state=NOT_MEASURED, ok=False, framework="?", world_size=nranks,
                          ranks_per_node=_layout(base["nodes"], nranks), reason=what, inferred="; ".join(how),
                          **base))
    notes += [f"{path.name}: inferred {s.inferred}" for s in out if s.inferred and s.state != NOT_MEASURED]
    return out


def _precision(head: str) -> str | None:
    return "fp16" if _FP16.search(head) else None


def _allreduce_row(r: dict[str, Any], collective: str) -> AllreduceRow:
    side = "oop" if r.get("oop_busbw") is not None else "ip"  # rccl-tests may print in-place only
    wrong = r.get(f"{side}_wrong")
    return AllreduceRow(size_bytes=int(r["size"]), count=int(r.get("count") or 0), dtype=str(r.get("type") or "?"),
                        time_us=float(r[f"{side}_time_us"]), algbw_gbps=float(r[f"{side}_algbw"]),
                        busbw_gbps=float(r[f"{side}_busbw"]),
                        wrong=int(wrong) if isinstance(wrong, (int, float)) else -1, collective=collective,
                        redop=str(r.get("redop") or "?"), root=r["root"] if isinstance(r.get("root"), int) else -1)
