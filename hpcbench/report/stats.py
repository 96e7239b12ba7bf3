"""Mean and 95% confidence interval (Student's t), without scipy."""

from __future__ import annotations

import math
from collections.abc import Sequence

# Two-sided 95% quantiles t(0.975, df) for df = 1..30; beyond that a series expansion is exact to 1e-4.
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
_Z975 = 1.959964


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError("t quantile needs at least one degree of freedom")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975  # Cornish-Fisher expansion of the t quantile around the normal one
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def mean_ci95(values: Sequence[float]) -> tuple[float | None, float | None]:
    """(mean, half-width of its 95% CI). One value has no CI (None); no values, neither."""
    n = len(values)
    if n == 0:
        return None, None
    mean = math.fsum(values) / n
    if n == 1:
        return mean, None
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, t975(n - 1) * math.sqrt(var / n)


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None
