"""Actor and critic networks (CleanRL-style MLPs with orthogonal init)."""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn
from torch.distributions import Categorical, Distribution, Normal

# Argument validation costs more than the sampling itself for per-step batches; our inputs come from
# the networks, whose outputs are checked for NaN/Inf by the health guard instead.
Distribution.set_default_validate_args(False)
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int, out_gain: float) -> nn.Sequential:
    """Tanh MLP; orthogonal weights (gain sqrt(2) hidden, ``out_gain`` output), zero biases."""
    layers, d = [], in_dim
    for h in hidden:
        layers += [_init(nn.Linear(d, h), math.sqrt(2)), nn.Tanh()]
        d = h
    layers.append(_init(nn.Linear(d, out_dim), out_gain))
    return nn.Sequential(*layers)


def _init(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class CategoricalActor(nn.Module):
    """Discrete actions: logits from an MLP. obs ``(B, D)`` -> Categorical over ``n`` actions."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int]):
        super().__init__()
        self.net = mlp(obs_dim, hidden, n_actions, out_gain=0.01)

    def distribution(self, obs: Tensor) -> Distribution:
        return Categorical(logits=self.net(obs))

    def mode(self, obs: Tensor) -> Tensor:
        return self.net(obs).argmax(-1)

    def evaluate(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Log-prob of ``actions`` ``(B,)`` and the policy entropy ``(B,)``."""
        dist = self.distribution(obs)
        return dist.log_prob(actions), dist.entropy()

    def sample(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Action ``(B,)`` and its log-prob ``(B,)``."""
        dist = self.distribution(obs)
        action = dist.sample()
        return action, dist.log_prob(action)


class GaussianActor(nn.Module):
    """Box actions: diagonal Gaussian, MLP mean and state-independent log-std. obs ``(B, D)``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int]):
        super().__init__()
        self.net = mlp(obs_dim, hidden, act_dim, out_gain=0.01)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def distribution(self, obs: Tensor) -> Distribution:
        mean = self.net(obs)
        return Normal(mean, self.log_std.exp().expand_as(mean))

    def mode(self, obs: Tensor) -> Tensor:
        return self.net(obs)

    def evaluate(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Log-prob of ``actions`` ``(B, A)`` -> ``(B,)`` and the entropy ``(B,)``, written out like ``sample``."""
        mean = self.net(obs)
        z = (actions - mean) * (-self.log_std).exp()
        logp = (-0.5 * z.pow(2) - self.log_std - HALF_LOG_2PI).sum(-1)
        entropy = (0.5 + HALF_LOG_2PI + self.log_std).sum().expand(logp.shape)
        return logp, entropy

    def sample(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Action ``(B, A)`` and its log-prob ``(B,)``; the same law as ``distribution(obs)``, written
        out (``log N(a) = -noise^2/2 - log std - log(2 pi)/2``) because it runs at every env step."""
        mean = self.net(obs)
        noise = torch.randn_like(mean)
        action = mean + self.log_std.exp() * noise
        return action, (-0.5 * noise.pow(2) - self.log_std - HALF_LOG_2PI).sum(-1)


class Critic(nn.Module):
    """State value: obs ``(B, D)`` -> ``(B,)``."""

    def __init__(self, obs_dim: int, hidden: Sequence[int]):
        super().__init__()
        self.net = mlp(obs_dim, hidden, 1, out_gain=1.0)

    def forward(self, obs: Tensor) -> Tensor:
        return self.net(obs).squeeze(-1)
