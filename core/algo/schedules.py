"""What changes over training, as pure functions of progress in ``[0, 1]`` (the fraction of total env steps done):
the learning-rate schedules, and the clip schedule of every on-policy family: ``eps_pi`` and ``eps_V`` per agent
(docs/algorithms.md).  For agent ``i`` of ``A`` (``A = 1``: the single-agent trainer) at progress ``p``::

    eps_low[i]  = min(eps_low * s_pi[i], EPS_PI_MAX)         (eps_high likewise: clip-higher)
    eps_V[i]    = eps_v_schedule(p) * s_V[i]                  (decoupled: DAPO's 0.5 -> 0.3)
                = clip_eps * s_pi[i]                          (shared: grpo's, mappo's one clip for policy and value)

The scales ``s_pi``, ``s_V`` ``(A,)`` start at 1 and only the health remedies (:mod:`core.algo.health`) change them.
With ``per_agent=False`` a remedy scales every agent at once, so all agents keep one clip.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch
from torch import Tensor


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

COLLAPSE_WIDEN = 1.5  # the collapse remedy enlarges eps_pi by 50% (docs/algorithms.md) ...
# ... at most once in a run: later collapses restore the best policy again but keep the clip.  Widening
# compounded otherwise: an Ant-v5 run (1M steps, DAPO with auto-lambda, seed 2) collapsed three times in
# 30k steps, then trained its last 560k steps at eps_pi 0.5 with an approx KL of 0.13-0.14 per update
# (0.03-0.05 in the same env's other seeds); the original definition names a clip below 0.05 or one bad update as the causes.
EPS_PI_MAX = 0.5  # and never beyond this absolute clip, whatever the configured one


def widen_eps_pi_scale(scale):
    """The collapse remedy's new eps_pi multiplier: ``min(scale * 1.5, 1.5)`` (a 0.2 clip becomes 0.3, then stays).

    ``scale`` is a float or a tensor of per-agent multipliers."""
    widened = scale * COLLAPSE_WIDEN  # capped at one widening of the configured clip
    return widened.clamp(max=COLLAPSE_WIDEN) if hasattr(widened, "clamp") else min(widened, COLLAPSE_WIDEN)


class ClipRanges(NamedTuple):
    """Per-agent clip ranges, each ``(A,)``; ``eps_v`` is ``None`` when the value is not clipped."""

    eps_low: Tensor
    eps_high: Tensor
    eps_v: Optional[Tensor]

    def gather(self, agent_id: Tensor) -> tuple[Tensor, Tensor, Optional[Tensor]]:
        """Per-sample ranges ``(M,)`` for a minibatch's agent ids ``(M,)``: sample j uses agent_id[j]'s."""
        return (self.eps_low[agent_id], self.eps_high[agent_id],
                None if self.eps_v is None else self.eps_v[agent_id])

    def scalars(self) -> tuple[float, float, Optional[float]]:
        """The one agent's ``(eps_low, eps_high, eps_V or None)`` as Python floats (``A == 1``)."""
        return float(self.eps_low), float(self.eps_high), None if self.eps_v is None else float(self.eps_v)


class ClipSchedule:
    """Base clip values from the config, the eps_V schedule, and the remedies' scales ``(A,)``.

    ``dtype``: the single-agent trainer keeps float64 so that its Python-float ranges are exactly
    ``min(eps * scale, EPS_PI_MAX)`` in double precision; ``dapo_ma`` gathers float32 ranges per sample."""

    def __init__(self, n_agents: int, clip_eps: float, eps_low: float, eps_high: float, clip_value: bool,
                 decoupled: bool, eps_v_start: float, eps_v_end: float, eps_v_schedule: str, per_agent: bool,
                 dtype: torch.dtype = torch.float32):
        self.clip_eps, self.eps_low, self.eps_high = clip_eps, eps_low, eps_high
        self.clip_value, self.decoupled, self.per_agent = clip_value, decoupled, per_agent
        self.eps_v_start, self.eps_v_end, self.eps_v_schedule = eps_v_start, eps_v_end, eps_v_schedule
        self.pi_scale = torch.ones(n_agents, dtype=dtype)  # (A,)
        self.v_scale = torch.ones(n_agents, dtype=dtype)   # (A,)

    @classmethod
    def from_config(cls, c, n_agents: int, per_agent: bool, decoupled: bool, clip_value: bool,
                    dtype: torch.dtype = torch.float32) -> "ClipSchedule":
        """From a family config's ``clip_eps``, ``clip_eps_low`` (single-agent only), ``clip_eps_high`` and eps_V
        options; each policy side defaults to ``clip_eps``."""
        low, high = getattr(c, "clip_eps_low", None) or c.clip_eps, c.clip_eps_high or c.clip_eps
        return cls(n_agents, c.clip_eps, low, high, clip_value, decoupled, c.eps_v_start, c.eps_v_end,
                   c.eps_v_schedule, per_agent, dtype)

    def ranges(self, progress: float, device: torch.device | str = "cpu") -> ClipRanges:
        """Every agent's ranges ``(A,)`` at ``progress``, on ``device``."""
        low = (self.eps_low * self.pi_scale).clamp(max=EPS_PI_MAX)
        high = (self.eps_high * self.pi_scale).clamp(max=EPS_PI_MAX)
        value = None
        if self.clip_value:
            value = (eps_v(self.eps_v_start, self.eps_v_end, self.eps_v_schedule, progress) * self.v_scale
                     if self.decoupled else self.clip_eps * self.pi_scale)
        return ClipRanges(low.to(device), high.to(device), None if value is None else value.to(device))

    def _agents(self, agent: int) -> slice | int:
        return agent if self.per_agent else slice(None)

    def widen_policy(self, agent: int) -> None:
        """Collapse remedy: enlarge agent ``agent``'s eps_pi by 50%, once (every agent's when clips are shared)."""
        idx = self._agents(agent)
        self.pi_scale[idx] = widen_eps_pi_scale(self.pi_scale[idx])

    def widen_value(self, agent: int, factor: float) -> None:
        """Divergence remedy: enlarge agent ``agent``'s eps_V by ``factor`` (every agent's when clips are shared)."""
        self.v_scale[self._agents(agent)] *= factor

    def state_dict(self) -> dict:
        return {"pi_scale": self.pi_scale.clone(), "v_scale": self.v_scale.clone()}

    def load_state_dict(self, s: dict) -> None:
        self.pi_scale = torch.as_tensor(s["pi_scale"], dtype=self.pi_scale.dtype).clone()
        self.v_scale = torch.as_tensor(s["v_scale"], dtype=self.v_scale.dtype).clone()
