"""Schedules as pure functions of training progress in ``[0, 1]`` (fraction of total env steps done)."""
from __future__ import annotations

import math
from typing import Optional


def linear(start: float, end: float, progress: float) -> float:
    """Linear interpolation from ``start`` (progress 0) to ``end`` (progress >= 1)."""
    return start + (end - start) * min(max(progress, 0.0), 1.0)


def eps_v(start: float, end: float, mode: str, progress: float) -> float:
    """DAPO's value clip range: ``linear`` 0.5 -> 0.3 by default (SPEC 2.3), or ``constant`` at start."""
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


def log_std_floor(floor: float, progress: float, anneal: bool, start: float = 0.0, end: float = 1.0) -> float:
    """The Gaussian policy's log-std floor at ``progress``: ``floor``, or with ``anneal`` the floor's std ``e^floor``
    held until ``start`` and then falling linearly to zero at ``end`` (-inf from there: no floor):
    ``floor + log(min(1, (end - progress) / (end - start)))``."""
    if not anneal:
        return floor
    rate = 1.0 / (end - start)  # written so that end = 1 gives the floats of the end-only schedule bit for bit
    remaining = min(linear(rate * end, rate * end - rate, progress), 1.0)
    return floor + math.log(remaining) if remaining > 0 else -math.inf


class KLAdaptiveLR:
    """Multiplier on the policy learning rate that holds the approx KL of an update near ``target``.

    After each update: ``scale *= factor`` if ``KL < target / 2``, ``scale /= factor`` if ``KL > 2 target``,
    clamped to ``[lowest, highest]``.  It is the adaptive-KL rule of Schulman et al. (2017, section 4)
    moved from a KL-penalty coefficient to the step size, as in Isaac Gym's PPO (Makoviychuk et al. 2021).
    Tried because DAPO's prioritised draws make a larger policy step than PPO's at the same learning rate
    (HalfCheetah approx KL 0.012 vs 0.0095). Holding DAPO's KL at PPO's level lost; target 0.008 without
    lr annealing was the best variant at 300k steps, did not separate (experiments/results/mujoco/ablation_kl),
    and lost at 1M (experiments/results/mujoco_1M/ablation).  ``highest=1`` makes it a brake only: with lr
    annealing, late updates' KL falls below ``target / 2`` and the unbounded rule would raise the rate again.
    """

    FACTOR, LOWEST = 1.5, 0.1  # defaults, named so the run's start line can describe the rule

    def __init__(self, target: float, factor: float = FACTOR, lowest: float = LOWEST, highest: float = 10.0):
        if target <= 0 or factor <= 1:
            raise ValueError(f"target_kl must be > 0 and factor > 1, got {target} and {factor}")
        self.target, self.factor, self.lowest, self.highest = target, factor, lowest, highest
        self.scale = 1.0

    def observe(self, approx_kl: float) -> float:
        """Update and return the scale from an update's mean approx KL (NaN leaves it unchanged)."""
        if approx_kl > 2 * self.target:
            self.scale = max(self.scale / self.factor, self.lowest)
        elif approx_kl < self.target / 2:
            self.scale = min(self.scale * self.factor, self.highest)
        return self.scale
