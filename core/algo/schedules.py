"""Schedules as pure functions of training progress in ``[0, 1]`` (fraction of total env steps done)."""
from __future__ import annotations

from typing import Optional


def linear(start: float, end: float, progress: float) -> float:
    """Linear interpolation from ``start`` (progress 0) to ``end`` (progress >= 1)."""
    return start + (end - start) * min(max(progress, 0.0), 1.0)


def eps_v(start: float, end: float, mode: str, progress: float) -> float:
    """DAPO's value clip range: ``linear`` 0.5 -> 0.3 by default (docs/algorithms.md), or ``constant`` at start."""
    return linear(start, end, progress) if mode == "linear" else start


def annealed_lr(base: float, progress: float, anneal: bool) -> float:
    """CleanRL/SB3-style linear decay to zero when ``anneal``."""
    return base * (1.0 - progress) if anneal else base


def policy_lr(base: float, progress: float, anneal: bool, step: int, drop_step: Optional[int],
              drop_factor: float) -> float:
    """Annealed policy rate, cut by ``drop_factor`` once ``step >= drop_step`` (the source's tip for
    late oscillation: 10x lower after ~100k steps)."""
    lr = annealed_lr(base, progress, anneal)
    return lr * drop_factor if drop_step is not None and step >= drop_step else lr
