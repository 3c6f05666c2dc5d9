"""The shared on-policy buffer: all agents' transitions in one :class:`core.algo.sampler.DynamicSampler`.

Dynamic-sampling weights ``p_j = softmax(|A_j| / max_k |A_k| / T)`` are computed over the whole
window, i.e. over every agent's transitions together, so an agent whose advantages are larger
contributes more of each minibatch.  Its share ``sum_{j: agent(j)=i} p_j`` is logged per agent.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Optional

import torch
from torch import Tensor

from core.training.checkpoint import LEGACY_RECORDS
from core.algo.sampler import DynamicSampler


class MATransitions(NamedTuple):
    """Flat agent transitions for the sampler, each ``(B, ...)`` with ``B = T*E*A``."""

    obs: Tensor          # (B, D) the agent's own observation (actor input)
    actions: Tensor      # (B,) discrete or (B, K) continuous
    logp_old: Tensor     # (B,) behaviour log-prob
    values_old: Tensor   # (B,) V_old at collection time
    advantages: Tensor   # (B,)
    returns: Tensor      # (B,)
    agent_id: Tensor     # (B,) long, in [0, A)
    critic_obs: Tensor   # (B, C) critic input (joint observation when centralised)


class AgentSampler(DynamicSampler):
    """A DynamicSampler that also counts which agents its minibatches drew."""

    def __init__(self, n_agents: int, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_agents = n_agents
        self.draws = torch.zeros(n_agents, dtype=torch.long)

    def minibatches(self, num_minibatches: int, minibatch_size: int) -> Iterator[tuple[Tensor, Optional[Tensor]]]:
        for idx, weights in super().minibatches(num_minibatches, minibatch_size):
            self.draws += torch.bincount(self.data.agent_id[idx], minlength=self.n_agents).cpu()
            yield idx, weights

    def expected_shares(self) -> Tensor:
        """Probability mass of each agent's transitions in the window ``(A,)``."""
        p = self.probabilities()
        ids = self.data.agent_id[: self.size]
        return torch.zeros(self.n_agents, device=p.device, dtype=p.dtype).index_add_(0, ids, p).cpu()

    def take_sampled_shares(self) -> Tensor:
        """Fraction of the draws since the last call that came from each agent ``(A,)``; resets the count."""
        shares = self.draws.double() / max(int(self.draws.sum()), 1)
        self.draws.zero_()
        return shares


LEGACY_RECORDS.append(MATransitions)  # version-1 checkpoints pickled the sampler's window as this named tuple
