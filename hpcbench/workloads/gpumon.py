"""GPU utilisation and memory, sampled in a background thread while the timed steps run.

NVML (pynvml) when it imports, else ``nvidia-smi``; neither gives ``None`` and the reason, so the
record says why it has no GPU figures instead of showing zeros.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable

from hpcbench import proc
from hpcbench.records import GpuUtil

INTERVAL_S = 0.1


def _nvml_reader(index: int, bus_id: str | None) -> Callable[[], tuple[float, float]]:
    import pynvml

    pynvml.nvmlInit()
    # NVML counts every GPU of the node, CUDA only the visible ones: the bus id names the same GPU in both.
    handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id) if bus_id else pynvml.nvmlDeviceGetHandleByIndex(index)

    def read() -> tuple[float, float]:
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return float(util.gpu), mem.used / 2 ** 20

    return read


def _smi_reader(index: int, bus_id: str | None) -> Callable[[], tuple[float, float]]:
    argv = ["nvidia-smi", f"--id={bus_id or index}", "--query-gpu=utilization.gpu,memory.used",
            "--format=csv,noheader,nounits"]

    def read() -> tuple[float, float]:
        ran = proc.run(argv, timeout=10)
        if not ran.ok:
            raise RuntimeError(ran.why())
        util, mem = (float(v) for v in ran.stdout.strip().splitlines()[0].split(","))
        return util, mem

    return read


class GpuSampler:
    """``with GpuSampler(cuda, index, bus_id) as s: ...``; then ``s.samples`` (util %, MiB) and ``s.source``.

    ``index`` is the CUDA index; ``bus_id`` (when known) names the same GPU to NVML and nvidia-smi, whose
    indexes ignore CUDA_VISIBLE_DEVICES."""

    def __init__(self, cuda: bool, index: int, bus_id: str | None = None) -> None:
        self.samples: list[tuple[float, float]] = []
        self.source: str | None = None
        self.reason: str | None = None
        self._read: Callable[[], tuple[float, float]] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if not cuda:
            self.reason = "device is cpu"
            return
        try:
            self._read, self.source = _nvml_reader(index, bus_id), "nvml"
        except Exception as e:  # noqa: BLE001  ImportError, or an NVML error (no driver): fall back
            if shutil.which("nvidia-smi"):
                self._read, self.source = _smi_reader(index, bus_id), "nvidia-smi"
            else:
                self.reason = f"no NVML ({type(e).__name__}: {e}) and no nvidia-smi on PATH"

    def _loop(self, read: Callable[[], tuple[float, float]]) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(read())
            except Exception as e:  # noqa: BLE001  a failing tool stops sampling; the reason is kept
                self.reason = f"{self.source} failed while sampling: {e}"
                return
            self._stop.wait(INTERVAL_S)

    def __enter__(self) -> GpuSampler:  # noqa: PYI034
        if self._read is not None:
            self._thread = threading.Thread(target=self._loop, args=(self._read,), daemon=True, name="hpcbench-gpumon")
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def summarize(per_rank: list[tuple[list[tuple[float, float]], str | None, str | None]]) -> tuple[GpuUtil | None, str | None]:
    """Pool every rank's samples into one GpuUtil, or (None, the first rank's reason)."""
    samples = [s for rank_samples, _, _ in per_rank for s in rank_samples]
    if not samples:
        reasons = [r for _, _, r in per_rank if r]
        return None, reasons[0] if reasons else "no samples: the timed steps ended before the first sample"
    utils = [u for u, _ in samples]
    source = next(src for _, src, _ in per_rank if src)
    return GpuUtil(util_mean=sum(utils) / len(utils), util_min=min(utils),
                   mem_used_mib_max=max(m for _, m in samples), samples=len(samples), source=source), None
