"""How the collector queries the behaviour policy at every env step.

:class:`TorchActing` calls the networks.  :class:`NumpyActing` acts with a NumPy copy of small MLP
networks on the CPU: at a handful of observations per step a 64x64 MLP is a few microseconds of
arithmetic, while torch's per-op dispatch and ``nn.Module`` calls cost several times more (actor plus
critic, one HalfCheetah observation: ~35 us in NumPy vs ~165 us in torch on the 2-core build machine;
experiments/bench_throughput.py measures the end-to-end effect).  The policy is fixed during a rollout,
so the weights are copied once per rollout.  Log-probs use the same formulas as
:meth:`core.algo.networks.GaussianActor.sample` and ``Categorical.log_prob``, so the update's torch
recomputation gives ratios of 1 up to float32 rounding (tested).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from core.algo.networks import HALF_LOG_2PI, CategoricalActor, Critic, GaussianActor


class TorchActing:
    """``act(obs (N, ...)) -> (actions, logp (N,), values (N,))`` with the torch networks."""

    def __init__(self, actor: nn.Module, critic: nn.Module):
        self.actor, self.critic = actor, critic

    def act(self, obs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        action, logp = self.actor.sample(obs)
        return action, logp, self.critic(obs)

    def value(self, obs: Tensor) -> Tensor:
        return self.critic(obs)


def _is_tanh_mlp(net: nn.Module) -> bool:
    """``nn.Sequential(Linear, Tanh, Linear, ..., Linear)``, as :func:`core.algo.networks.mlp` builds."""
    if not isinstance(net, nn.Sequential):
        return False
    layers = list(net)
    return (len(layers) % 2 == 1 and all(isinstance(m, nn.Linear) for m in layers[0::2])
            and all(isinstance(m, nn.Tanh) for m in layers[1::2]))


def _mlp_weights(net: nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(W^T (in, out), b (out,)), ...]``: copies, so later optimiser steps do not change them."""
    return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy()) for m in list(net)[0::2]]


def _forward(weights: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    """Tanh MLP: ``x (N, D) -> (N, out)``."""
    for w, b in weights[:-1]:
        x = np.tanh(x @ w + b)
    w, b = weights[-1]
    return x @ w + b


def _side_by_side(a: list[tuple[np.ndarray, np.ndarray]],
                  c: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Two MLPs of equal depth on the same input as one: the first layers' weights side by side, the
    later ones block-diagonal, so ``_forward`` of the result is ``[actor(x), critic(x)]`` concatenated
    in half the NumPy calls (each call's overhead, not its arithmetic, is the cost at a few rows)."""
    fused = [(np.concatenate([a[0][0], c[0][0]], 1), np.concatenate([a[0][1], c[0][1]]))]
    for (wa, ba), (wc, bc) in zip(a[1:], c[1:]):
        w = np.zeros((wa.shape[0] + wc.shape[0], wa.shape[1] + wc.shape[1]), np.float32)
        w[:wa.shape[0], :wa.shape[1]], w[wa.shape[0]:, wa.shape[1]:] = wa, wc
        fused.append((w, np.concatenate([ba, bc])))
    return fused


class NumpyActing:
    """MLP actor and critic evaluated in NumPy float32; samples from its own seeded generator ``rng``."""

    def __init__(self, actor: nn.Module, critic: nn.Module, rng: np.random.Generator):
        self.rng = rng
        self.actor_w, self.critic_w = _mlp_weights(actor.net), _mlp_weights(critic.net)
        self.fused = _side_by_side(self.actor_w, self.critic_w) if len(self.actor_w) == len(self.critic_w) else None
        self.gaussian = isinstance(actor, GaussianActor)
        if self.gaussian:
            log_std = actor.log_std.detach().numpy().astype(np.float32)
            self.std = np.exp(log_std)
            self.logp_const = np.float32(-(log_std + HALF_LOG_2PI).sum())

    @staticmethod
    def supports(actor: nn.Module, critic: nn.Module, device: torch.device) -> bool:
        """CPU MLP networks of the kinds :func:`core.algo.networks.build_networks` makes for flat observations."""
        return (device.type == "cpu" and isinstance(actor, (GaussianActor, CategoricalActor))
                and isinstance(critic, Critic) and _is_tanh_mlp(actor.net) and _is_tanh_mlp(critic.net))

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """NumPy in, NumPy out: the collector keeps the whole rollout in arrays (no per-step tensors)."""
        if self.fused is not None:
            both = _forward(self.fused, obs)                                         # (N, A + 1) or (N, n + 1)
            out, value = both[:, :-1], both[:, -1]
        else:
            out, value = _forward(self.actor_w, obs), self.value(obs)                # (N, A) or (N, n), (N,)
        if self.gaussian:
            noise = self.rng.standard_normal(out.shape, dtype=np.float32)
            action = out + self.std * noise
            logp = -0.5 * (noise * noise).sum(-1) + self.logp_const
        else:
            log_probs = out - out.max(-1, keepdims=True)
            log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))            # log-softmax
            u = self.rng.random((out.shape[0], 1), dtype=np.float32)
            action = (np.exp(log_probs).cumsum(-1) < u).sum(-1).clip(max=out.shape[1] - 1)  # inverse CDF
            logp = np.take_along_axis(log_probs, action[:, None], -1)[:, 0]
        return action, logp.astype(np.float32, copy=False), value

    def value(self, obs: np.ndarray) -> np.ndarray:
        return _forward(self.critic_w, obs)[:, 0]
