"""Universal Scalability Law fit (Gunther): X(N) = lam * N / (1 + sigma*(N-1) + kappa*N*(N-1)).

sigma: contention share, kappa: coherency cost, lam: one-thread throughput; with kappa > 0 the
peak is at N* = sqrt((1 - sigma) / kappa). Fitted by relative-error weighted least squares
(scipy.optimize.curve_fit, parameters >= 0); 95 % t intervals from the covariance (dof = points
- 3), the peak's by the delta method."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np
from scipy import optimize, stats

MIN_POINTS = 4  # three parameters need at least one degree of freedom.


def usl(n, lam, sigma, kappa):
    n = np.asarray(n, dtype=float)
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


@dataclasses.dataclass
class UslFit:
    """Fitted parameters with 95 % intervals (lo, hi); peak fields None when kappa ~ 0."""

    lam: float
    sigma: float
    kappa: float
    sigma_ci: tuple
    kappa_ci: tuple
    peak_threads: Optional[float]
    peak_threads_ci: Optional[tuple]
    peak_throughput: Optional[float]
    peak_throughput_ci: Optional[tuple]

    def summary(self) -> str:
        text = f"σ={self.sigma:.3g} [{self.sigma_ci[0]:.2g},{self.sigma_ci[1]:.2g}] " \
               f"κ={self.kappa:.3g} [{self.kappa_ci[0]:.2g},{self.kappa_ci[1]:.2g}]"
        if self.peak_threads is not None:
            text += f", peak N≈{self.peak_threads:.0f} ({self.peak_throughput:.3g}/s)"
        else:
            text += ", no peak (κ≈0)"
        return text


class UslError(ValueError):
    """The data cannot be fitted (too few thread counts, or the optimiser failed)."""


def fit_usl(threads: Sequence[float], throughput: Sequence[float]) -> UslFit:
    """Fit the USL to (threads, throughput) pairs; raises UslError when it cannot."""
    n = np.asarray(threads, dtype=float)
    x = np.asarray(throughput, dtype=float)
    if len(set(n.tolist())) < MIN_POINTS:
        raise UslError(f"fewer than {MIN_POINTS} thread counts ({len(set(n.tolist()))}): "
                       "USL not fitted")
    if np.any(x <= 0) or np.any(n <= 0):
        raise UslError("USL needs positive thread counts and throughputs")
    lam0 = float(np.max(x[n == n.min()]) / n.min())
    try:
        popt, pcov = optimize.curve_fit(
            usl, n, x, p0=(lam0, 0.01, 1e-4), sigma=x, absolute_sigma=False,
            bounds=([0.0, 0.0, 0.0], [np.inf, 1.0, np.inf]), maxfev=20000)
    except (RuntimeError, ValueError, optimize.OptimizeWarning) as err:
        raise UslError(f"USL fit failed: {err}") from None
    lam, sigma, kappa = (float(v) for v in popt)
    dof = max(1, len(n) - 3)
    t = float(stats.t.ppf(0.975, dof))
    err = np.sqrt(np.clip(np.diag(pcov), 0, None)) if np.all(np.isfinite(pcov)) else np.full(3, np.inf)

    def ci(value, se):
        return (max(0.0, value - t * se), value + t * se)

    peak_n = peak_x = peak_n_ci = peak_x_ci = None
    if kappa > 1e-12 and sigma < 1.0:
        peak_n = math.sqrt((1.0 - sigma) / kappa)
        peak_x = float(usl(peak_n, lam, sigma, kappa))
        # Delta method: gradients of N* and X(N*) with respect to (lam, sigma, kappa).
        g_n = np.array([0.0, -0.5 / math.sqrt((1 - sigma) * kappa),
                        -0.5 * math.sqrt(1 - sigma) * kappa ** -1.5])
        eps = np.maximum(np.abs(popt) * 1e-6, 1e-12)
        g_x = np.zeros(3)
        for i in range(3):
            hi, lo = popt.copy(), popt.copy()
            hi[i] += eps[i]
            lo[i] -= eps[i]

            def peak_val(p):
                pn = math.sqrt(max(1e-300, (1 - p[1])) / max(1e-300, p[2]))
                return float(usl(pn, *p))

            g_x[i] = (peak_val(hi) - peak_val(lo)) / (2 * eps[i])
        if np.all(np.isfinite(pcov)):
            se_n = math.sqrt(max(0.0, float(g_n @ pcov @ g_n)))
            se_x = math.sqrt(max(0.0, float(g_x @ pcov @ g_x)))
        else:
            se_n = se_x = math.inf
        peak_n_ci = (max(1.0, peak_n - t * se_n), peak_n + t * se_n)
        peak_x_ci = (max(0.0, peak_x - t * se_x), peak_x + t * se_x)
    return UslFit(lam, sigma, kappa, ci(sigma, err[1]), ci(kappa, err[2]),
                  peak_n, peak_n_ci, peak_x, peak_x_ci)
