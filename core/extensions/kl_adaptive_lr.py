"""A multiplier on the policy learning rate that holds each update's approx KL near a target.

After each update: ``scale *= 1.5`` if ``KL < target / 2``, ``scale /= 1.5`` if ``KL > 2 target``, clamped to
``[0.1, max_scale]``.  It is the adaptive-KL rule of Schulman et al. (2017, sec. 4) moved from a KL-penalty
coefficient to the step size, as in Isaac Gym's PPO (Makoviychuk et al. 2021).  ``max_scale 1`` makes it a brake:
with lr annealing late updates' KL falls below ``target / 2`` and the unbounded rule would raise the rate again
(up to 10x by 1M steps in the nine runs checked).  Braked at target 0.05, Humanoid at std e^-1 went from 1036 to
1938 (10 seeds, P 0.75); on HalfCheetah and Walker2d it never acts (experiments/results/MUJOCO.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from core.config.errors import ConfigError
from core.extensions import Extension, register

FACTOR, LOWEST = 1.5, 0.1


@dataclass
class KLAdaptiveLROptions:
    target: float = 0.05
    """Approx KL per update to hold (the band is target/2 .. 2 target)."""
    max_scale: float = 10.0
    """Highest multiplier on the scheduled rate (Isaac Gym's 10; 1 makes the rule a brake only)."""

    def validate(self) -> None:
        if not (math.isfinite(self.target) and self.target > 0):
            raise ConfigError(f"extension kl_adaptive_lr: target must be a positive number, got {self.target}")
        if not (math.isfinite(self.max_scale) and self.max_scale >= 1):
            raise ConfigError(f"extension kl_adaptive_lr: max_scale must be at least 1 (1: brake only), got "
                              f"{self.max_scale}")


class KLAdaptiveScale:
    """The rule on its own: ``observe(approx_kl) -> scale`` (NaN leaves it unchanged)."""

    def __init__(self, target: float, factor: float = FACTOR, lowest: float = LOWEST, highest: float = 10.0):
        if target <= 0 or factor <= 1:
            raise ValueError(f"target must be > 0 and factor > 1, got {target} and {factor}")
        self.target, self.factor, self.lowest, self.highest = target, factor, lowest, highest
        self.scale = 1.0

    def observe(self, approx_kl: float) -> float:
        if approx_kl > 2 * self.target:
            self.scale = max(self.scale / self.factor, self.lowest)
        elif approx_kl < self.target / 2:
            self.scale = min(self.scale * self.factor, self.highest)
        return self.scale


@register
class KLAdaptiveLR(Extension):
    name = "kl_adaptive_lr"
    Options = KLAdaptiveLROptions
    summary = "policy learning rate x1.5 / /1.5 to hold each update's approx KL near a target (max_scale=1: a brake)."

    def __init__(self, options: KLAdaptiveLROptions, trainer):
        super().__init__(options, trainer)
        self.rule = KLAdaptiveScale(options.target, highest=options.max_scale)

    def describe(self) -> str:
        t = self.options.target
        if self.options.max_scale == 1:
            return f"policy lr /{FACTOR:g} after each update with approx KL > {2 * t:g}, never above schedule"
        return f"policy lr adapted to hold approx KL near {t:g} (x{LOWEST:g} .. x{self.options.max_scale:g})"

    def policy_lr_scale(self) -> float:
        return self.rule.scale

    def after_update(self, trainer, metrics: dict[str, float]) -> dict[str, float]:
        self.rule.observe(metrics.get("train/approx_kl", math.nan))
        return {}

    def state_dict(self) -> dict:
        return {"scale": self.rule.scale}

    def load_state_dict(self, state: dict) -> None:
        self.rule.scale = float(state["scale"])
