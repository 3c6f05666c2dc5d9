"""How the collector queries the behaviour policy at every env step.

:class:`TorchActing` calls the networks.  :class:`NumpyActing` acts with a NumPy copy of small MLP
networks on the CPU: at a handful of observations per step a 64x64 MLP is a few microseconds of
arithmetic, while torch's per-op dispatch and ``nn.Module`` calls cost several times more (actor plus
critic, one HalfCheetah observation: ~35 us in NumPy vs ~165 us in torch on the 2-core build machine;
experiments/bench_throughput.py measures the end-to-end effect).  The policy is fixed during a rollout,
so the weights are copied once per rollout.  The NumPy networks and action heads are those of
:mod:`core.algo.numpy_policy` (shared with the NumPy update); their log-probs are the laws of
:class:`core.algo.networks.GaussianActor` and ``Categorical``, so the update's recomputation gives ratios of 1 up
to float32 rounding (tested).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from core.algo.numpy_policy import copied_layers, head_class, mlp_forward, side_by_side, supported


class TorchActing:
    """``act(obs (N, ...)) -> (actions, logp (N,), values (N,))`` with the torch networks."""

    def __init__(self, actor: nn.Module, critic: nn.Module):
        self.actor, self.critic = actor, critic

    def act(self, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        action, logp = self.actor.sample(obs)
        return action, logp, self.critic(obs)

    def value(self, obs: Tensor) -> Tensor:
        return self.critic(obs)


class NumpyActing:
    """MLP actor and critic evaluated in NumPy float32 (core.algo.numpy_policy); samples from its own seeded
    generator ``rng``."""

    def __init__(self, actor: nn.Module, critic: nn.Module, rng: np.random.Generator):
        self.rng = rng
        self.actor_w, self.critic_w = copied_layers(actor.net), copied_layers(critic.net)
        self.fused = side_by_side(self.actor_w, self.critic_w) if len(self.actor_w) == len(self.critic_w) else None
        head = head_class(actor)
        self.head = head(*(p.detach().numpy().astype(np.float32) for p in head.parameters(actor)))  # copies

    @staticmethod
    def supports(actor: nn.Module, critic: nn.Module, device: torch.device) -> bool:
        """CPU MLP networks of the kinds :func:`core.algo.networks.build_networks` makes for flat observations."""
        return supported(actor, critic, device)

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """NumPy in, NumPy out: the collector keeps the whole rollout in arrays (no per-step tensors)."""
        if self.fused is not None:
            both = mlp_forward(self.fused, obs)                                      # (N, A + 1) or (N, n + 1)
            out, value = both[:, :-1], both[:, -1]
        else:
            out, value = mlp_forward(self.actor_w, obs), self.value(obs)             # (N, A) or (N, n), (N,)
        action, logp = self.head.sample(out, self.rng)
        return action, logp.astype(np.float32, copy=False), value

    def value(self, obs: np.ndarray) -> np.ndarray:
        return mlp_forward(self.critic_w, obs)[:, 0]
