"""A lock as a closed queueing network (the ticket-lock Markov model of Boyd-Wickizer et al.,
"Non-scalable locks are dangerous", Linux Symposium 2012, generalised): N threads alternate
between thinking (mean `think`) and a single FCFS lock server whose mean service time
`service(j)` may grow with the j threads at the lock (spinning waiters re-read the line on each
hand-off; MCS does not grow). Times in any one unit (callers: ns), throughput per that unit.

Solvers: exact MVA (Reiser and Lavenberg 1980), load-independent (`mva`) or load-dependent
(`mva_load_dependent`); `birth_death` (vectorised over draws, predict.py's); `machine_repairman`
and `simulate` (discrete-event, seeded) check them. Assumes exponential times and memoryless
service (docs/prediction.md)."""

from __future__ import annotations

import heapq
import math
import random
from typing import Callable, List, Tuple

import numpy as np

ServiceFn = Callable[[int], float]


def mva(n_max: int, think: float, service: float) -> List[Tuple[float, float, float]]:
    """[(X, R, Q)] for n = 1..n_max of one FCFS server plus a delay station: throughput, mean
    residence time at the lock and mean number of threads at it:
    X(n) = n / (Z + R(n)), R(n) = S (1 + Q(n - 1)), Q(n) = X(n) R(n)."""
    if n_max < 1 or think < 0 or service <= 0:
        raise ValueError(f"mva: need n_max >= 1, think >= 0, service > 0 (got {n_max}, "
                         f"{think}, {service})")
    out = []
    q = 0.0
    for n in range(1, n_max + 1):
        r = service * (1.0 + q)
        x = n / (think + r)
        q = x * r
        out.append((x, r, q))
    return out


def mva_load_dependent(n: int, think: float, service: ServiceFn) -> Tuple[float, float, float]:
    """Exact MVA with one load-dependent FCFS server (mean service `service(j)`) and a delay
    station of mean `think`, recursing over populations with the marginals p(j | k). Returns (X, R,
    Q) at population n."""
    if n < 1 or think < 0:
        raise ValueError(f"mva_load_dependent: need n >= 1 and think >= 0 (got {n}, {think})")
    s = [0.0] + [float(service(j)) for j in range(1, n + 1)]
    p = [1.0]  # p(j | 0)
    x = r = 0.0
    for k in range(1, n + 1):
        r = sum(j * s[j] * p[j - 1] for j in range(1, k + 1))
        x = k / (think + r)
        new = [0.0] * (k + 1)
        for j in range(1, k + 1):
            new[j] = x * s[j] * p[j - 1]
        new[0] = max(0.0, 1.0 - sum(new[1:]))
        p = new
    return x, r, x * r


def birth_death(n: int, think, service_of_j, stats: bool = False):
    """Throughput of the same network from its product-form distribution, p(j) ~ prod_{i<=j} (n - i
    + 1) / think * service(i), in log space, vectorised over draws: think scalar or (B,),
    service_of_j (B, n) or (n,); think == 0: X = 1 / service(n). Returns X of shape (B,);
    stats=True: (X, Q, U), the mean threads at the lock and the chance it is held."""
    s = np.atleast_2d(np.asarray(service_of_j, dtype=float))
    z = np.atleast_1d(np.asarray(think, dtype=float))
    if s.shape[1] != n:
        raise ValueError(f"birth_death: service_of_j has {s.shape[1]} columns, expected {n}")
    b = max(s.shape[0], z.shape[0])
    s = np.broadcast_to(s, (b, n))
    z = np.broadcast_to(z, (b,))
    out = np.empty(b)
    q = np.empty(b)
    u = np.empty(b)
    zero = z <= 0
    out[zero] = 1.0 / s[zero, n - 1]
    q[zero] = n
    u[zero] = 1.0
    if (~zero).any():
        zs = z[~zero][:, None]
        ss = s[~zero]
        j = np.arange(1, n + 1)
        terms = np.log(n - j + 1)[None, :] - np.log(zs) + np.log(ss)
        logp = np.concatenate([np.zeros((ss.shape[0], 1)), np.cumsum(terms, axis=1)], axis=1)
        logp -= logp.max(axis=1, keepdims=True)
        p = np.exp(logp)
        p /= p.sum(axis=1, keepdims=True)
        out[~zero] = (p[:, 1:] / ss).sum(axis=1)
        q[~zero] = (p * np.arange(0, n + 1)[None, :]).sum(axis=1)
        u[~zero] = 1.0 - p[:, 0]
    return (out, q, u) if stats else out


def machine_repairman(n: int, think: float, service: float) -> float:
    """Throughput of the machine-repairman model (M/M/1//N):
    p0 = 1 / sum_{k=0..n} n! / (n - k)! * (service / think)^k, X = (1 - p0) / service."""
    if n < 1 or service <= 0 or think < 0:
        raise ValueError("machine_repairman: need n >= 1, service > 0, think >= 0")
    if think == 0:
        return 1.0 / service
    rho = service / think
    # Terms in log space: log(n!/(n-k)!) + k log rho.
    logs = [math.lgamma(n + 1) - math.lgamma(n - k + 1) + k * math.log(rho) for k in range(n + 1)]
    top = max(logs)
    total = sum(math.exp(v - top) for v in logs)
    p0 = math.exp(logs[0] - top) / total
    return (1.0 - p0) / service


def simulate(n: int, think: float, service: ServiceFn, completions: int = 100000,
             seed: int = 1, warmup: int = 2000) -> float:
    """Discrete-event simulation of the model (seeded); returns throughput. When j changes
    during a service the remaining service is redrawn at the new rate (exact for exponential
    service: memoryless)."""
    if n < 1 or think < 0 or completions < 1:
        raise ValueError("simulate: need n >= 1, think >= 0, completions >= 1")
    rng = random.Random(seed)
    now = 0.0
    events: List[Tuple[float, int, int]] = []  # (time, kind 0=arrive 1=done, thread or version)
    queue: List[int] = []
    version = 0

    def draw(mean: float) -> float:
        return rng.expovariate(1.0 / mean) if mean > 0 else 0.0

    def start_service() -> None:
        nonlocal version
        version += 1
        if queue:
            heapq.heappush(events, (now + draw(service(len(queue))), 1, version))

    for t in range(n):
        if think > 0:
            heapq.heappush(events, (draw(think), 0, t))
        else:
            queue.append(t)
    start_service()
    done = 0
    t_start = 0.0
    while done < completions + warmup:
        now, kind, who = heapq.heappop(events)
        if kind == 1:
            if who != version:
                continue  # stale: the service was redrawn
            thread = queue.pop(0)
            done += 1
            if done == warmup:
                t_start = now
            if think > 0:
                heapq.heappush(events, (now + draw(think), 0, thread))
            else:
                queue.append(thread)
            start_service()
        else:
            queue.append(who)
            start_service()  # j changed: redraw the holder's remaining service
    return completions / (now - t_start)
