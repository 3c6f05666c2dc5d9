"""A floor under the Gaussian policy's action noise, kept by projection after every update.

After each update ``log_std <- max(log_std, floor(progress))`` per action dimension (projected gradient descent:
within an update the log-std may dip below it).  With ``relative`` the floor is in units of each action's
half-range ``(high - low) / 2``, so the same relative noise holds on Humanoid (actions in +-0.4) as on envs whose
actions span +-1.  With ``anneal`` the floor's std ``e^floor`` holds until ``anneal_start`` (a share of training)
and then falls linearly to zero at the end.

Why: at std e^-1 DAPO's Walker2d walkers narrowed to std ~0.15 while GRPO's, from std 1, ended at ~0.31 and
walked faster; held at 0.30 for the first half of training, Walker2d went from 3385 to 4039 (10 seeds, P 0.69),
at a price on Ant (1961 -> 1619, P 0.36) (experiments/results/MUJOCO.md).  Logs ``train/log_std_floored``, the
share of action dims the projection lifted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.config.errors import ConfigError
from core.extensions import Extension, register

if TYPE_CHECKING:  # torch, NumPy, Gymnasium and the schedules are imported where used: the registry is read for --help
    import torch


@dataclass
class NoiseFloorOptions:
    log_std_min: float = -1.2
    """Floor on each action dim's log-std (with relative: plus the log of the action's half-range)."""
    relative: bool = False
    """Measure the floor in units of each action's half-range (high - low) / 2."""
    anneal: bool = False
    """Lower the floor's std linearly to zero over training (after anneal_start)."""
    anneal_start: float = 0.0
    """With anneal: the share of training during which the floor holds before it falls."""

    def validate(self) -> None:
        if not -20 <= self.log_std_min <= 2:
            raise ConfigError(f"extension noise_floor: log_std_min must be in [-20, 2], got {self.log_std_min}")
        if not 0 <= self.anneal_start < 1 or (self.anneal_start and not self.anneal):
            raise ConfigError(f"extension noise_floor: anneal_start must be in [0, 1) and needs anneal=true, got "
                              f"{self.anneal_start}")


def floor_at(level: float, progress: float, anneal: bool, start: float = 0.0) -> float:
    """The log-std floor at ``progress`` in [0, 1]: ``level``, or with ``anneal`` the floor's std held until ``start``
    and then falling linearly to zero at the end (-inf there): ``level + log(min(1, (1 - progress) / (1 - start)))``."""
    if not anneal:
        return level
    from core.algo.schedules import linear

    rate = 1.0 / (1.0 - start)  # written as the committed runs computed it, so their floats are reproduced bit for bit
    remaining = min(linear(rate, rate - rate, progress), 1.0)
    return level + math.log(remaining) if remaining > 0 else -math.inf


def log_half_range(act_space, device) -> torch.Tensor:
    """(act_dim,) log of each action's half-range (high - low) / 2 (0 for actions in +-1)."""
    import numpy as np
    import torch

    half_range = (np.asarray(act_space.high, np.float64) - np.asarray(act_space.low, np.float64)) / 2
    if not np.all(np.isfinite(half_range) & (half_range > 0)):
        raise ConfigError(f"extension noise_floor: relative=true needs finite action bounds, and these are "
                          f"{act_space.low} .. {act_space.high}; set relative=false")
    return torch.as_tensor(np.log(half_range).reshape(-1), dtype=torch.float32, device=device)


@register
class NoiseFloor(Extension):
    name = "noise_floor"
    Options = NoiseFloorOptions
    summary = "floor under the Gaussian policy's log-std, optionally relative to the action range and falling."

    @classmethod
    def check(cls, options: NoiseFloorOptions, cfg, action_space) -> None:
        import gymnasium as gym

        if not isinstance(action_space, gym.spaces.Box):
            raise ConfigError(f"extension noise_floor acts on a Gaussian policy's noise, and {cfg.env} has "
                              f"{type(action_space).__name__} actions; remove it (--ext noise_floor off)")
        if options.log_std_min > cfg.log_std_init:
            raise ConfigError(f"extension noise_floor: log_std_min {options.log_std_min} is above the initial log-std "
                              f"{cfg.log_std_init} (--log-std-init); the floor would move it at once")
        if options.relative:
            log_half_range(action_space, "cpu")

    def __init__(self, options: NoiseFloorOptions, trainer):
        import torch

        super().__init__(options, trainer)
        self.check(options, trainer.cfg, trainer.action_space)
        log_std = trainer.actor.log_std
        self.offset = (log_half_range(trainer.action_space, log_std.device) if options.relative
                       else torch.zeros((), device=log_std.device))

    def describe(self) -> str:
        o = self.options
        text = f"action log-std floored at {o.log_std_min} (std {math.exp(o.log_std_min):.2f}"
        text += " x each action's half-range" if o.relative else ""
        return text + (f", falling linearly to 0 from {o.anneal_start:.0%} of training to the end)" if o.anneal else ")")

    def after_update(self, trainer, metrics: dict[str, float]) -> dict[str, float]:
        import torch

        o, log_std = self.options, trainer.actor.log_std
        floor = floor_at(o.log_std_min, trainer.global_step / trainer.cfg.total_steps, o.anneal, o.anneal_start)
        floor = floor + self.offset
        with torch.no_grad():
            lifted = (log_std < floor).float().mean().item()
            log_std.clamp_(min=floor)
        return {"train/log_std_floored": lifted}
