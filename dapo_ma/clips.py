"""Per-agent clip ranges ``eps_pi[i]`` and ``eps_V[i]`` (docs/algorithms.md), gathered per sample by agent id.

For agent ``i`` at training progress ``p`` in ``[0, 1]``::

    eps_pi[i] = min(clip_eps * s_pi[i], EPS_PI_MAX)          (eps_high likewise for clip-higher)
    eps_V[i]  = eps_v_schedule(p) * s_V[i]                   (decoupled: DAPO's 0.5 -> 0.3)
              = clip_eps * s_pi[i]                           (shared: one clip for policy and value)

The scales ``s_pi``, ``s_V`` start at 1 and are changed only by the health remedies.  With
``per_agent=False`` (IPPO/MAPPO) a remedy scales every agent at once, so all agents share one clip.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch
from torch import Tensor

from core.algo import schedules
from core.algo.health import EPS_PI_MAX, widen_eps_pi_scale


class ClipRanges(NamedTuple):
    """Per-agent clip ranges, each ``(A,)``; ``eps_v`` is ``None`` when the value is not clipped."""

    eps_low: Tensor
    eps_high: Tensor
    eps_v: Optional[Tensor]

    def gather(self, agent_id: Tensor) -> tuple[Tensor, Tensor, Optional[Tensor]]:
        """Per-sample ranges ``(M,)`` for a minibatch's agent ids ``(M,)``: sample j uses agent_id[j]'s."""
        return (self.eps_low[agent_id], self.eps_high[agent_id],
                None if self.eps_v is None else self.eps_v[agent_id])


class AgentClips:
    """The per-agent clip state: base values from the config and schedules, remedies as scales."""

    def __init__(self, n_agents: int, clip_eps: float, clip_eps_high: Optional[float], clip_value: bool,
                 decoupled: bool, eps_v_start: float, eps_v_end: float, eps_v_schedule: str, per_agent: bool):
        self.n_agents, self.clip_eps, self.clip_eps_high = n_agents, clip_eps, clip_eps_high or clip_eps
        self.clip_value, self.decoupled, self.per_agent = clip_value, decoupled, per_agent
        self.eps_v_start, self.eps_v_end, self.eps_v_schedule = eps_v_start, eps_v_end, eps_v_schedule
        self.pi_scale = torch.ones(n_agents)  # (A,)
        self.v_scale = torch.ones(n_agents)   # (A,)

    def ranges(self, progress: float, device: torch.device) -> ClipRanges:
        low = (self.clip_eps * self.pi_scale).clamp(max=EPS_PI_MAX)
        high = (self.clip_eps_high * self.pi_scale).clamp(max=EPS_PI_MAX)
        if not self.clip_value:
            eps_v = None
        elif self.decoupled:
            eps_v = schedules.eps_v(self.eps_v_start, self.eps_v_end, self.eps_v_schedule, progress) * self.v_scale
        else:
            eps_v = self.clip_eps * self.pi_scale
        return ClipRanges(low.to(device), high.to(device), None if eps_v is None else eps_v.to(device))

    def _agents(self, agent: int) -> slice | int:
        return agent if self.per_agent else slice(None)

    def widen_policy(self, agent: int) -> None:
        """Collapse remedy: enlarge agent ``agent``'s eps_pi by 50%, once (every agent's when clips are shared)."""
        idx = self._agents(agent)
        self.pi_scale[idx] = widen_eps_pi_scale(self.pi_scale[idx])

    def widen_value(self, agent: int, factor: float) -> None:
        """Divergence remedy: enlarge agent ``agent``'s eps_V (every agent's when clips are shared)."""
        self.v_scale[self._agents(agent)] *= factor

    def state_dict(self) -> dict:
        return {"pi_scale": self.pi_scale.clone(), "v_scale": self.v_scale.clone()}

    def load_state_dict(self, s: dict) -> None:
        self.pi_scale, self.v_scale = s["pi_scale"].clone(), s["v_scale"].clone()
