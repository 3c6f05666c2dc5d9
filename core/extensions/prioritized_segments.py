"""PufferLib 3.0's prioritized segment sampling in place of the trainer's minibatch sampler.

Segments of ``segment_length`` steps of one env are drawn with probability ``(sum |A|)^alpha`` (normalised) and
their surrogates weighted by ``(S p)^-beta``, beta annealed from ``beta0`` (:mod:`core.algo.segment_sampler` has the
definition and how it differs from DAPO's draws).  It is here as the peer that DAPO's advantage-weighted
sampling is measured against (experiments/results/sparse), not as a default.  It replaces DAPO's draws, so it
refuses ``--dynamic-sampling``; the window is the current rollout.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from core.config.errors import ConfigError
from core.extensions import Extension, register


@dataclass
class PrioritizedSegmentsOptions:
    alpha: float = 0.8
    """Priority exponent on each segment's summed |A| (0: uniform segments). PufferLib 3.0's default config: 0.8."""
    beta0: float = 0.2
    """Importance exponent at the start; it grows to beta0 + (1 - beta0) * alpha. PufferLib's default: 0.2."""
    segment_length: int = 16
    """Consecutive steps of one env per segment; must divide the steps per env and the minibatch size."""

    def validate(self) -> None:
        if not (math.isfinite(self.alpha) and 0 <= self.alpha <= 1):
            raise ConfigError(f"extension prioritized_segments: alpha must be in [0, 1], got {self.alpha}")
        if not (math.isfinite(self.beta0) and 0 <= self.beta0 <= 1):
            raise ConfigError(f"extension prioritized_segments: beta0 must be in [0, 1], got {self.beta0}")
        if self.segment_length < 1:
            raise ConfigError(f"extension prioritized_segments: segment_length must be >= 1, got {self.segment_length}")


@register
class PrioritizedSegments(Extension):
    name = "prioritized_segments"
    Options = PrioritizedSegmentsOptions
    summary = "PufferLib 3.0's minibatches of segments drawn by (sum |A|)^alpha, surrogates weighted (S p)^-beta."

    @classmethod
    def check(cls, options: PrioritizedSegmentsOptions, cfg, action_space) -> None:
        length, steps = options.segment_length, cfg.num_steps
        minibatch = cfg.num_envs * steps // cfg.num_minibatches
        problems = [
            (cfg.dynamic_sampling, "it replaces DAPO's advantage-weighted draws: add --no-dynamic-sampling"),
            (cfg.window != cfg.num_envs * steps, f"its window is one rollout ({cfg.num_envs * steps}); drop --window"),
            (steps % length, f"segment_length {length} must divide --num-steps {steps}"),
            (minibatch % length, f"segment_length {length} must divide the minibatch size {minibatch}"),
            (cfg.backend == "envpool", "EnvPool's reset steps would cut segments; use --backend sync or async"),
        ]
        for bad, why in problems:
            if bad:
                raise ConfigError(f"extension prioritized_segments: {why}")

    def __init__(self, options: PrioritizedSegmentsOptions, trainer):
        super().__init__(options, trainer)
        c = trainer.cfg
        from core.algo.segment_sampler import SegmentSampler  # torch: not when the registry is read for --help

        self.replacement = SegmentSampler(c.num_envs, c.num_steps, options.segment_length, options.alpha,
                                          options.beta0, trainer.device, seed=c.seed)

    def sampler(self, trainer):
        return self.replacement

    def describe(self) -> str:
        o = self.options
        return f"prioritized segments (alpha {o.alpha}, beta0 {o.beta0}, length {o.segment_length})"
