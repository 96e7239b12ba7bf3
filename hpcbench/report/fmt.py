"""Number formatting shared by every table: one place decides how a value and its CI look."""

from __future__ import annotations

import math


def num(v: float | None, digits: int = 2) -> str:
    if v is None:
        return "—"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if 0 < abs(v) < 10 ** -digits:  # small bandwidths (CPU allreduce of a few bytes) must not read as zero
        return f"{v:.2g}"
    return f"{v:.{digits}f}"


def pm(v: float | None, ci: float | None, digits: int = 2) -> str:
    """'12.34 ± 0.56'; a value without a CI is shown alone."""
    if v is None:
        return "—"
    return num(v, digits) if ci is None else f"{num(v, digits)} ± {num(ci, digits)}"


def interval(v: float | None, lo: float | None, hi: float | None, digits: int = 2) -> str:
    """'8,509 (6,120–14,380)': a value and its 95% interval, which need not be symmetric; ∞ for no upper end."""
    if v is None:
        return "—"
    if lo is None or hi is None:
        return num(v, digits)
    top = "∞" if math.isinf(hi) else num(hi, digits)
    return f"{num(v, digits)} ({num(lo, digits)}–{top})"


def pct_interval(v: float | None, lo: float | None, hi: float | None) -> str:
    """'67% (40–90%)': a fraction and its 95% interval as percentages; ∞ for no upper end."""
    if v is None or lo is None or hi is None:
        return pct(v)
    return f"{pct(v)} ({pct(lo)[:-1]}–{'∞' if math.isinf(hi) else pct(hi)})"


def pm0(v: float | None, ci: float | None, digits: int = 2) -> str:
    """'12.34 ± 0.56', or '12.34 (0–25.00)' when the interval would reach below zero: times are never negative."""
    if v is not None and ci is not None and v - ci < 0:
        return interval(v, 0.0, v + ci, digits)
    return pm(v, ci, digits)


def pct(v: float | None, digits: int = 0) -> str:
    return "—" if v is None else f"{v * 100:.{digits}f}%"


def clip(text: str | None, width: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def ms(seconds: float | None) -> float | None:
    """Seconds as milliseconds; None stays None."""
    return None if seconds is None else seconds * 1e3


def duration_us(us: float | None) -> str:
    """A time given in microseconds, in the unit that reads best: '8.2 us', '1.14 ms', '2.31 s'."""
    if us is None:
        return "—"
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if us >= scale:
            return f"{us / scale:.3g} {unit}"
    return f"{us:.3g} us"


def size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"
