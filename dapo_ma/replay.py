"""MADDPG's replay buffer of joint transitions (all agents of one env copy at one step)."""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class JointTransitions(NamedTuple):
    obs: Tensor         # (B, A, D)
    actions: Tensor     # (B, A, K) one-hot (discrete) or box vector (continuous)
    rewards: Tensor     # (B, A) raw rewards
    next_obs: Tensor    # (B, A, D) the successor observation (the final one where an episode ended)
    terminated: Tensor  # (B, A) bool: no bootstrap


class ReplayBuffer:
    """Ring buffer on the training device; uniform sampling with replacement."""

    def __init__(self, capacity: int, n_agents: int, obs_dim: int, act_size: int, device: torch.device):
        A, D, K = n_agents, obs_dim, act_size
        self.capacity, self.device = capacity, device
        self.data = JointTransitions(torch.zeros(capacity, A, D, device=device), torch.zeros(capacity, A, K, device=device),
                                     torch.zeros(capacity, A, device=device), torch.zeros(capacity, A, D, device=device),
                                     torch.zeros(capacity, A, dtype=torch.bool, device=device))
        self.size = 0
        self.head = 0

    def add(self, batch: JointTransitions) -> None:
        """Append ``B`` joint transitions (``B <= capacity``), overwriting the oldest."""
        b = batch.obs.shape[0]
        idx = (self.head + torch.arange(b, device=self.device)) % self.capacity
        for store, x in zip(self.data, batch):
            store[idx] = x.to(self.device, store.dtype)
        self.head = (self.head + b) % self.capacity
        self.size = min(self.size + b, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator) -> JointTransitions:
        idx = torch.randint(self.size, (batch_size,), generator=generator, device=self.device)
        return JointTransitions(*(x[idx] for x in self.data))

    def state_dict(self) -> dict:
        return {"data": tuple(x[: self.size].clone() for x in self.data), "size": self.size, "head": self.head}

    def load_state_dict(self, s: dict) -> None:
        for store, x in zip(self.data, s["data"]):
            store[: s["size"]] = x.to(self.device)
        self.size, self.head = s["size"], s["head"]
