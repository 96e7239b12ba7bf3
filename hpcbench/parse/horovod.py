"""Horovod synthetic benchmark totals and tf_cnn_benchmarks' ``total images/sec``. The last value wins:
a benchmark prints per-iteration lines first and its summary at the end."""

from __future__ import annotations

import re
from typing import Any

PER_GPU = re.compile(r"Img/sec per GPU:\s*([\d.]+)\s*\+-\s*([\d.]+)")
TOTAL = re.compile(r"Total img/sec on (\d+) GPU\(s\):\s*([\d.]+)\s*\+-\s*([\d.]+)")
TF_TOTAL = re.compile(r"total images/sec:\s*([\d.]+)")


class HorovodState:
    def __init__(self) -> None:
        self.per_gpu: float | None = None
        self.per_gpu_err: float | None = None
        self.total: float | None = None
        self.total_err: float | None = None
        self.num_gpus: int | None = None
        self.seen = False

    def feed(self, text: str) -> None:
        if "Img/sec per GPU" in text:
            m = PER_GPU.search(text)
            if m:
                self.per_gpu, self.per_gpu_err, self.seen = float(m.group(1)), float(m.group(2)), True
        elif "Total img/sec" in text:
            m = TOTAL.search(text)
            if m:
                self.num_gpus, self.total, self.total_err = int(m.group(1)), float(m.group(2)), float(m.group(3))
                self.seen = True
        elif "images/sec" in text:
            m = TF_TOTAL.search(text)
            if m:
                self.total, self.total_err, self.seen = float(m.group(1)), None, True

    def result(self) -> dict[str, Any] | None:
        if not self.seen:
            return None
        return {"total_img_sec": self.total, "per_gpu_img_sec": self.per_gpu, "num_gpus": self.num_gpus,
                "total_img_sec_err": self.total_err, "per_gpu_img_sec_err": self.per_gpu_err}
