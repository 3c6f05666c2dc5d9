"""DAPO on MADDPG: shared sampling weights over the replay buffer and per-agent clip parameters (docs/algorithms.md).

**Shared sampling weights.**  Every joint transition ``j`` (all agents of one env copy at one step) has one
priority, the agents' mean absolute TD error of the centralised critics::

    w_j = (1/A) sum_i |y_ij - Q_i(o_j, a_j)|

It is shared because a joint transition is one sample for every agent's critic and, through them, every actor; the
mean (not the max) keeps one agent's noisy critic from deciding alone.  Minibatches are drawn from the whole buffer
with DAPO's ``p = softmax((w / max w) / T)`` by :class:`core.algo.sampler.DynamicSampler` (its temperature rules and its
importance weights ``1/(N p_j)``); the drawn transitions' priorities are refreshed after each update, and new
transitions enter with the largest priority in the buffer, so each is likely drawn soon (prioritized replay,
Schaul et al. 2016).

**Per-agent clip parameters.**  MADDPG takes one gradient step per update, so a trust region around the networks just
before each step would never bind; the anchor of each trust region is the networks as they were at the start of the
iteration (a snapshot taken before the gradient steps between two collections, as PPO anchors on the policy that
collected the data). Anchors on the Polyak targets were measured first and bound on 80-90% of the samples, which
left most gradients at zero (experiments/results/ma_maddpg/anchor_study):

- critic of agent i, with ``Q^a`` the anchor critic:
  ``Q_clip = Q^a_i(o, a) + clip(Q_i(o, a) - Q^a_i(o, a), -eps_V[i] s_i, eps_V[i] s_i)`` and the loss
  ``max((Q_i - y_i)^2, (Q_clip - y_i)^2)`` (DAPO's value clip), with ``s_i`` the batch's std of agent i's targets, so
  that eps_V is a share of the value scale (MPE's raw returns are tens of units);
- discrete actor i (straight-through Gumbel-softmax): the soft sample ``y`` and the anchor actor's ``y'`` under the
  same Gumbel noise; the gradient flows through ``y' * clip(y / y', 1 - eps_low[i], 1 + eps_high[i])``, zero for the
  components whose ratio left the range (PPO's clipped ratio, on the action probabilities);
- continuous actor i: the action ``mu^a + clip(mu - mu^a, -eps_low[i] r, eps_high[i] r)`` with ``mu^a`` the anchor
  actor's and ``r`` the action range.

The ranges ``eps_pi[i]`` and ``eps_V[i]`` are core's :class:`core.algo.schedules.ClipSchedule`, adapted by agent i's own
health monitors (:class:`core.algo.health.HealthController`), as in dapo-ma.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch
from torch import Tensor, nn

from core.training.checkpoint import LEGACY_RECORDS
from core.algo.sampler import DynamicSampler, Temperature
from dapo_ma.networks import MASKED_LOGIT
from dapo_ma.replay import JointTransitions


class PrioritizedTransitions(NamedTuple):
    """Joint transitions with their shared priority in the field core's sampler reads (``advantages``)."""

    obs: Tensor          # (B, A, D)
    actions: Tensor      # (B, A, K)
    rewards: Tensor      # (B, A)
    next_obs: Tensor     # (B, A, D)
    terminated: Tensor   # (B, A) bool
    advantages: Tensor   # (B,) priority w_j >= 0


LEGACY_RECORDS.append(PrioritizedTransitions)


class SharedPriorityReplay:
    """MADDPG's replay buffer in :class:`core.algo.sampler.DynamicSampler`: draws ``p = softmax((w/max w)/T)`` over all
    stored joint transitions, importance weights ``1/(N p_j)`` when asked, priorities refreshed by the update."""

    def __init__(self, capacity: int, device: torch.device, temperature: Temperature, importance_correction: bool,
                 seed: int):
        self.sampler = DynamicSampler(capacity, device, temperature, dynamic=True,
                                      importance_correction=importance_correction, seed=seed)
        self.device = device

    @property
    def size(self) -> int:
        return self.sampler.size

    def add(self, batch: JointTransitions) -> None:
        """New transitions enter with the buffer's largest priority (1 in an empty buffer)."""
        top = float(self.sampler.window().advantages.max()) if self.sampler.size else 1.0
        prio = torch.full((batch.obs.shape[0],), max(top, 1e-6), device=self.device)
        self.sampler.add(PrioritizedTransitions(*(x.to(self.device) for x in batch), prio))

    def sample(self, batch_size: int) -> tuple[JointTransitions, Tensor, Optional[Tensor]]:
        """``batch_size`` joint transitions drawn from p, their buffer indices ``(B,)`` and importance weights
        ``(B,)`` (None without importance correction)."""
        ((idx, weights),) = self.sampler.minibatches(1, batch_size)
        data = self.sampler.data
        return JointTransitions(*(x[idx] for x in data[:5])), idx, weights

    def update_priorities(self, idx: Tensor, priorities: Tensor) -> None:
        """Refresh the drawn transitions' priorities ``(B,)`` (a transition drawn twice keeps one of its values)."""
        self.sampler.data.advantages[idx] = priorities.detach().to(self.sampler.data.advantages.dtype)

    def state_dict(self) -> dict:
        s = self.sampler.state_dict()
        return {**s, "data": None if s["data"] is None else tuple(x[: self.sampler.size].clone() for x in s["data"])}

    def load_state_dict(self, s: dict) -> None:
        data = s["data"]
        if data is not None:  # the stored prefix back into a buffer of full capacity
            self.sampler.add(PrioritizedTransitions(*data))
        self.sampler.size, self.sampler.head = s["size"], s["head"]
        self.sampler.generator.set_state(s["generator"])
        self.sampler.temperature.load_state_dict(s["temperature"])


def clipped_q(q: Tensor, q_anchor: Tensor, targets: Tensor, eps_v: Tensor) -> tuple[Tensor, Tensor]:
    """Per-sample clipped critic loss ``max((Q - y)^2, (Q_clip - y)^2)`` ``(B, A)`` and the clipped share ``(A,)``.

    ``q``, ``q_anchor`` (the anchor critic's: the critic at the start of the iteration), ``targets`` ``(B, A)``;
    ``eps_v`` ``(A,)`` in units of each agent's batch std of targets."""
    scale = eps_v * targets.std(0).clamp_min(1e-6)                                  # (A,)
    q_clip = q_anchor + (q - q_anchor).clamp(-scale, scale)
    per = torch.max((q - targets).pow(2), (q_clip - targets).pow(2))
    return per, ((q - q_anchor).abs() > scale).float().mean(0).detach()


def clipped_gumbel(logits: Tensor, anchor_logits: Tensor, tau: float, eps_low: Tensor, eps_high: Tensor,
                   generator: Optional[torch.Generator] = None) -> tuple[Tensor, Tensor]:
    """A straight-through Gumbel-softmax one-hot ``(..., K)`` whose gradient passes only through the soft-sample
    components within ``[1 - eps_low, 1 + eps_high]`` of the anchor's under the same noise; and the clipped share of
    components per agent ``(A,)``.  ``logits``, ``anchor_logits`` ``(B, A, K)`` (masked); ``eps_*`` ``(A,)``."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device).clamp(1e-10, 1 - 1e-10)
    gumbel = -torch.log(-torch.log(u))
    soft = torch.softmax((logits + gumbel) / tau, -1)
    with torch.no_grad():
        anchor = torch.softmax((anchor_logits + gumbel) / tau, -1).clamp_min(1e-12)
    low, high = (1 - eps_low).view(1, -1, 1), (1 + eps_high).view(1, -1, 1)
    ratio = soft / anchor
    clipped = anchor * torch.max(torch.min(ratio, high), low)  # = soft inside the range; constant (no gradient) out
    hard = nn.functional.one_hot(soft.argmax(-1), soft.shape[-1]).to(soft.dtype)
    outside = ((ratio < low) | (ratio > high)).float().mean(dim=(0, 2)).detach()
    return hard - clipped.detach() + clipped, outside


def clipped_box(mu: Tensor, anchor_mu: Tensor, span: Tensor, eps_low: Tensor, eps_high: Tensor) -> tuple[Tensor, Tensor]:
    """Continuous actions ``(B, A, K)`` kept within ``[-eps_low r, +eps_high r]`` of the anchor's (``r = span``, the
    action range ``(A, K)``), with the clipped share per agent ``(A,)``."""
    lo, hi = -eps_low.view(1, -1, 1) * span, eps_high.view(1, -1, 1) * span
    delta = mu - anchor_mu.detach()
    clipped = anchor_mu.detach() + torch.max(torch.min(delta, hi), lo)
    return clipped, ((delta < lo) | (delta > hi)).float().mean(dim=(0, 2)).detach()


def masked_logits(actor, obs: Tensor, agent_id: Tensor) -> tuple[Tensor, Tensor]:
    """The discrete actor's raw output and its logits with missing actions masked, ``(B, A, K)`` each."""
    out = actor.net(obs, agent_id)
    return out, out.masked_fill(~actor.mask[agent_id], MASKED_LOGIT)
