"""Per-agent networks: decentralised actors, local or centralised critics, with or without sharing.

Every network takes inputs ``(..., in_dim)`` and integer agent ids ``(...)`` of the same leading
shape.  With parameter sharing one MLP serves all agents and sees a one-hot agent id appended to
its input; without, agent ``i``'s rows go through its own MLP.  The MLPs are core's
(:func:`core.algo.networks.mlp`: tanh, orthogonal init).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn
from torch.distributions import Categorical, Distribution, Normal

from core.algo.networks import mlp
from dapo_ma.envs import ActionLayout

MASKED_LOGIT = -1e9  # logits of actions an agent does not have


class AgentMLP(nn.Module):
    """``f_i(x)``: one shared MLP on ``[x, onehot(i)]``, or one MLP per agent. ``(..., in) -> (..., out)``."""

    def __init__(self, in_dim: int, out_dim: int, n_agents: int, hidden: Sequence[int], shared: bool,
                 out_gain: float):
        super().__init__()
        self.n_agents, self.shared, self.out_dim = n_agents, shared, out_dim
        if shared:
            self.net = mlp(in_dim + n_agents, hidden, out_dim, out_gain)
        else:
            self.nets = nn.ModuleList(mlp(in_dim, hidden, out_dim, out_gain) for _ in range(n_agents))

    def forward(self, x: Tensor, agent_id: Tensor) -> Tensor:
        if self.shared:
            onehot = nn.functional.one_hot(agent_id, self.n_agents).to(x.dtype)
            return self.net(torch.cat([x, onehot], dim=-1))
        flat_x, flat_id = x.reshape(-1, x.shape[-1]), agent_id.reshape(-1)
        out = flat_x.new_zeros(flat_x.shape[0], self.out_dim)
        for i, net in enumerate(self.nets):
            rows = flat_id == i
            if rows.any():
                out[rows] = net(flat_x[rows])
        return out.reshape(*x.shape[:-1], self.out_dim)


def critic_inputs(obs: Tensor, centralised: bool) -> Tensor:
    """Critic input per agent from observations ``(..., A, D)``.

    Centralised (CTDE, MADDPG/MAPPO): the joint observation ``[o_1, ..., o_A]`` for every agent,
    ``(..., A, A*D)``; local (IPPO): the agent's own ``o_i``, ``(..., A, D)``."""
    if not centralised:
        return obs
    joint = obs.reshape(*obs.shape[:-2], 1, obs.shape[-2] * obs.shape[-1])
    return joint.expand(*obs.shape[:-2], obs.shape[-2], joint.shape[-1])


class MAActor(nn.Module):
    """Decentralised stochastic policy ``pi_i(a | o_i)``: categorical over the agent's own actions
    (missing ones masked) or a diagonal Gaussian with a per-agent log-std (missing dims ignored)."""

    def __init__(self, obs_dim: int, layout: ActionLayout, n_agents: int, hidden: Sequence[int], shared: bool):
        super().__init__()
        self.discrete = layout.discrete
        self.net = AgentMLP(obs_dim, layout.size, n_agents, hidden, shared, out_gain=0.01)
        self.register_buffer("mask", torch.as_tensor(layout.mask))  # (A, size)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.zeros(n_agents, layout.size))

    def distribution(self, obs: Tensor, agent_id: Tensor) -> Distribution:
        out = self.net(obs, agent_id)
        if self.discrete:
            return Categorical(logits=out.masked_fill(~self.mask[agent_id], MASKED_LOGIT))
        return Normal(out, self.log_std[agent_id].exp())

    def log_prob(self, dist: Distribution, actions: Tensor, agent_id: Tensor) -> Tensor:
        """``log pi_i(a|o_i)`` ``(...)``; Gaussian log-densities summed over the agent's own dims."""
        if self.discrete:
            return dist.log_prob(actions)
        return (dist.log_prob(actions) * self.mask[agent_id]).sum(-1)

    def entropy(self, dist: Distribution, agent_id: Tensor) -> Tensor:
        if self.discrete:
            return dist.entropy()
        return (dist.entropy() * self.mask[agent_id]).sum(-1)

    def act(self, obs: Tensor, agent_id: Tensor, deterministic: bool) -> Tensor:
        """Sampled, or the mode (argmax / mean) when ``deterministic``."""
        dist = self.distribution(obs, agent_id)
        if not deterministic:
            return dist.sample()
        return dist.logits.argmax(-1) if self.discrete else dist.mean


class MACritic(nn.Module):
    """``V_i(x)`` for critic inputs ``(..., C)`` (see :func:`critic_inputs`) -> ``(...)``."""

    def __init__(self, in_dim: int, n_agents: int, hidden: Sequence[int], shared: bool):
        super().__init__()
        self.net = AgentMLP(in_dim, 1, n_agents, hidden, shared, out_gain=1.0)

    def forward(self, x: Tensor, agent_id: Tensor) -> Tensor:
        return self.net(x, agent_id).squeeze(-1)
