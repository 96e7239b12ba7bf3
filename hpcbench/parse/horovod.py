"""Horovod synthetic benchmark totals and tf_cnn_benchmarks' ``total images/sec``. The last value wins:
a benchmark prints per-iteration lines first and its summary at the end. Per-iteration lines after the last
summary ('Iter #3: 62.9 img/sec per GPU', tf_cnn's '10  images/sec: 205.3 +/- 0.0') are counted: a run cut
before its summary is a run that printed N iterations, never "nothing recognised".

Horovod prints its device in the line: ``Img/sec per GPU``/``CPU``, ``Total img/sec on N GPU(s)``/``CPU(s)``.
The rank count is the N of that line, else the script's ``Number of GPUs: N``, else the launcher's
``mpirun -np N`` / ``horovodrun -np N`` (the one before the totals, when a log holds several runs).
"""

from __future__ import annotations

import re
from typing import Any

PER_DEVICE = re.compile(r"Img/sec per (GPU|CPU):\s*([\d.]+)\s*\+-\s*([\d.]+)")
TOTAL = re.compile(r"Total img/sec on (\d+) (GPU|CPU)\(s\):\s*([\d.]+)\s*\+-\s*([\d.]+)")
TF_TOTAL = re.compile(r"total images/sec:\s*([\d.]+)")
ITER = re.compile(r"Iter #(\d+):\s*([\d.]+) img/sec per (GPU|CPU)|^\s*(\d+)\s+images/sec:\s*([\d.]+)")
NUMBER_OF = re.compile(r"^Number of (GPU|CPU)s: (\d+)\s*$")
# horovodrun's own lines when a worker fails (runner/gloo_run.py, elastic/driver.py): its output, even without a rate
EXITED = re.compile(r"^\s*Process (\d+) exit with status code (-?\d+)")
STOPPED = re.compile(r"failure count == (\d+) -> stop running")
LAUNCHER = re.compile(r"\b(?:mpirun|mpiexec|orterun|horovodrun)(?:\.\w+)?\s(?:.*?\s)??(?:-np|-n|--np|-c)\s+(\d+)\b")


RATES_MAX = 4096  # distinct iteration lines whose rate is remembered (memory stays bounded)


class HorovodState:
    # A line that holds none of these changes nothing here (feed tests each first; LAUNCHER needs a launcher).
    MARKS = ("/sec", "exit with status code", "-> stop running", "Number of ", "mpirun", "mpiexec", "orterun",
             "horovodrun")

    def __init__(self) -> None:
        self.per: dict[str, tuple[float, float]] = {}  # device -> (img/sec per device, +-)
        self.total: float | None = None
        self.total_err: float | None = None
        self.device: str | None = None
        self.count: int | None = None  # N of "Total img/sec on N GPU(s)"
        self.number_of: int | None = None  # "Number of GPUs: N"
        self.np: int | None = None  # the last launcher -np read
        self.np_at_total: int | None = None  # the launcher -np in force when the totals were printed
        self.iters = 0  # per-iteration lines since the last summary
        self.last_iter: float | None = None  # the rate of the last one
        self.exits: list[tuple[int, int]] = []  # (process, status) horovodrun said a worker exited with, non-zero
        self.stopped: int | None = None  # the failure count at which elastic horovodrun stopped the job
        self.seen = False
        # an iteration line's rate (None: not one), by its text: a job prints the same lines again and again
        self._rates_of: dict[str, float | None] = {}

    def feed(self, text: str) -> None:
        if "/sec" in text:
            self._rates(text)
        elif "exit with status code" in text or "-> stop running" in text:
            self._failed(text)
        elif "Number of " in text:
            m = NUMBER_OF.search(text.strip())
            if m:
                self.number_of, self.device = int(m.group(2)), m.group(1)
        elif "-n" in text or "-c" in text:
            m = LAUNCHER.search(text)
            if m:
                self.np = int(m.group(1))

    def _failed(self, text: str) -> None:
        if m := EXITED.search(text):
            if int(m.group(2)) != 0:
                self.exits.append((int(m.group(1)), int(m.group(2))))
                self.seen = True
        elif m := STOPPED.search(text):
            self.stopped, self.seen = int(m.group(1)), True

    def _rates(self, text: str) -> None:
        if "Iter #" in text or ("images/sec:" in text and "total" not in text):
            rate = self._rates_of.get(text, -1.0)
            if rate == -1.0:
                m = ITER.search(text)
                rate = None if m is None else float(m.group(2) or m.group(5))
                if len(self._rates_of) >= RATES_MAX:
                    self._rates_of.clear()
                self._rates_of[text] = rate
            if rate is not None:
                self.iters += 1
                self.last_iter, self.seen = rate, True
            return
        if "Img/sec per " in text:
            m = PER_DEVICE.search(text)
            if m:
                self.per[m.group(1)] = (float(m.group(2)), float(m.group(3)))
                self.device, self.seen = m.group(1), True
        elif "Total img/sec" in text:
            m = TOTAL.search(text)
            if m:
                self.count, self.device = int(m.group(1)), m.group(2)
                self.total, self.total_err, self.seen = float(m.group(3)), float(m.group(4)), True
                self.np_at_total, self.iters = self.np, 0
        elif "images/sec" in text:
            m = TF_TOTAL.search(text)
            if m:
                self.total, self.total_err, self.seen = float(m.group(1)), None, True
                self.np_at_total, self.iters = self.np, 0

    def result(self) -> dict[str, Any] | None:
        if not self.seen:
            return None
        launcher = self.np_at_total if self.total is not None and self.np_at_total is not None else self.np
        ranks, source = next(((n, s) for n, s in ((self.count, "total line"), (self.number_of, "number line"),
                                                  (launcher, "launcher")) if n is not None), (None, None))
        gpu, cpu = self.per.get("GPU"), self.per.get("CPU")
        return {"total_img_sec": self.total, "total_img_sec_err": self.total_err, "device": self.device,
                "per_gpu_img_sec": gpu and gpu[0], "per_gpu_img_sec_err": gpu and gpu[1],
                "num_gpus": self.count if self.device == "GPU" else None,
                "per_cpu_img_sec": cpu and cpu[0], "per_cpu_img_sec_err": cpu and cpu[1],
                "num_cpus": self.count if self.device == "CPU" else None,
                "ranks": ranks, "ranks_source": source, "launcher_np": launcher,
                # a run after the last summary that printed iterations and no summary of its own (cut, or stopped)
                "unfinished": {"iterations": self.iters, "last_img_sec": self.last_iter, "launcher_np": self.np}
                if self.iters else None,
                # the workers horovodrun said exited non-zero, and whether elastic mode then stopped the job
                "failed": {"exits": [{"process": p, "status": c} for p, c in self.exits], "stopped_at": self.stopped}
                if self.exits or self.stopped is not None else None}
