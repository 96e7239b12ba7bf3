"""A GPU's datasheet figures (gpus.toml): dense bf16 and fp32 TFLOP/s and memory bandwidth, per device as
CUDA/ROCm counts devices, each with the source it came from. A figure the table does not hold is None: the
doctor then says so instead of judging against a guess."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcbench.explain import links

FIGURES = ("bf16", "fp32", "memory")  # the keys a row may hold; units: TFLOP/s, TFLOP/s, GB/s


@dataclass(frozen=True)
class Datasheet:
    name: str  # the table's name for the model
    bf16: float | None  # dense TFLOP/s
    fp32: float | None  # non-tensor TFLOP/s
    memory: float | None  # GB/s
    source: str  # where the memory figure (and the compute figures, unless compute_source) came from
    compute_source: str
    note: str = ""


def table() -> list[dict[str, Any]]:
    return list(links.read_table("gpus.toml")["gpu"])


def lookup(gpu: str) -> Datasheet | None:
    """The row for a GPU by the name NVML/torch gives it ("NVIDIA H100 80GB HBM3"), or None."""
    name = gpu.upper()
    for e in table():
        if any(m.upper() in name for m in e["match"]) and not any(x.upper() in name for x in e.get("exclude", ())):
            per = 1.0 / e.get("devices", 1)
            figs = {k: e[k] * per if k in e else None for k in FIGURES}
            return Datasheet(e["name"], figs["bf16"], figs["fp32"], figs["memory"], e["source"],
                             e.get("compute_source", e["source"]), e.get("note", ""))
    return None
