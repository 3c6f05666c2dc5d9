"""Actor and critic networks: CleanRL-style MLPs, or the Nature-DQN CNN for Atari, with orthogonal init."""
from __future__ import annotations

import math
from typing import Optional, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.distributions import Categorical, Distribution, Normal

# Argument validation costs more than the sampling itself for per-step batches; our inputs come from
# the networks, whose outputs are checked for NaN/Inf by the health guard instead.
Distribution.set_default_validate_args(False)
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int, out_gain: float) -> nn.Sequential:
    """Tanh MLP; orthogonal weights (gain sqrt(2) hidden, ``out_gain`` output), zero biases."""
    layers, d = [], in_dim
    for h in hidden:
        layers += [orthogonal_init(nn.Linear(d, h), math.sqrt(2)), nn.Tanh()]
        d = h
    layers.append(orthogonal_init(nn.Linear(d, out_dim), out_gain))
    return nn.Sequential(*layers)


@torch.no_grad()
def refit_input_layer(layer: nn.Linear, fitted: tuple[np.ndarray, np.ndarray],
                      current: tuple[np.ndarray, np.ndarray]) -> None:
    """Rewrite ``layer``, the first layer of a network trained on observations normalised as
    ``z_f = (x - m_f) / s_f``, in place so that it gives the same output on ``z_c = (x - m_c) / s_c``.

    ``fitted = (m_f, s_f)``, ``current = (m_c, s_c)``, each ``(D,)`` with ``D = layer.in_features``.
    From ``z_f = z_c * s_c / s_f + (m_c - m_f) / s_f``:
    ``W z_f + b = (W diag(s_c / s_f)) z_c + (b + W (m_c - m_f) / s_f)``.
    Why: the collapse remedy restores the actor's best weights, but the observation normaliser's running
    statistics kept moving since, so the bare weights would be a different policy of the raw observation.
    Exact while no normalised coordinate reaches the normaliser's clip (+-10).
    """
    (m_f, s_f), (m_c, s_c) = fitted, current
    if len(m_f) != layer.in_features or len(m_c) != layer.in_features:
        raise ValueError(f"normaliser statistics of size {len(m_f)}/{len(m_c)} do not match the layer's "
                         f"{layer.in_features} inputs")
    w = layer.weight.double()
    scale, shift = (torch.as_tensor(x, dtype=torch.float64, device=w.device) for x in (s_c / s_f, (m_c - m_f) / s_f))
    layer.bias.copy_((layer.bias.double() + w @ shift).to(layer.bias.dtype))
    layer.weight.copy_((w * scale).to(layer.weight.dtype))


def input_layer(net: nn.Module) -> nn.Linear:
    """The first ``nn.Linear`` of an MLP network (the layer that reads the normalised observation)."""
    return next(m for m in net.modules() if isinstance(m, nn.Linear))


class NatureCNN(nn.Module):
    """The Nature-DQN encoder (Mnih et al. 2015): frames ``(B, 4, 84, 84)`` uint8 -> features ``(B, out_dim)``.

    Runs channels-last (about 1.8x faster convolutions on CPU) and, with ``bf16=True``, under bfloat16
    autocast (another ~2x on CPUs with AMX/AVX512-BF16); the features are returned in fp32 so the
    heads, log-probs and losses stay fp32.
    """

    def __init__(self, out_dim: int = 512, in_channels: int = 4, bf16: bool = False):
        super().__init__()
        g = math.sqrt(2)
        self.convs = nn.Sequential(
            orthogonal_init(nn.Conv2d(in_channels, 32, 8, stride=4), g), nn.ReLU(),   # (B, 32, 20, 20)
            orthogonal_init(nn.Conv2d(32, 64, 4, stride=2), g), nn.ReLU(),            # (B, 64, 9, 9)
            orthogonal_init(nn.Conv2d(64, 64, 3, stride=1), g), nn.ReLU(),            # (B, 64, 7, 7)
        ).to(memory_format=torch.channels_last)
        self.fc = orthogonal_init(nn.Linear(64 * 7 * 7, out_dim), g)
        self.bf16 = bf16

    def forward(self, frames: Tensor) -> Tensor:
        x = (frames.float() / 255.0).contiguous(memory_format=torch.channels_last)
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            x = self.convs(x).flatten(1)                                    # (B, 3136)
            return torch.relu(self.fc(x)).float()


def resolve_precision(precision: str) -> str:
    """``auto`` -> :func:`preferred_cnn_precision`; ``fp32``/``bf16`` stay as given."""
    return preferred_cnn_precision() if precision == "auto" else precision


def preferred_cnn_precision() -> str:
    """``bf16`` where bf16 convolutions are fast (CUDA; CPUs with AVX512-BF16 or AMX), else ``fp32``
    (without them bf16 autocast on the CPU is slower than fp32)."""
    if torch.cuda.is_available():
        return "bf16"
    try:
        fast = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    except AttributeError:  # older torch: no probe
        fast = False
    return "bf16" if fast else "fp32"


def orthogonal_init(layer: nn.Module, gain: float) -> nn.Module:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class CategoricalActor(nn.Module):
    """Discrete actions: logits from an MLP, or from ``net`` when given (e.g. a NatureCNN and a linear
    layer for frames). obs ``(B, D)`` -> Categorical over ``n`` actions."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int], net: Optional[nn.Module] = None):
        super().__init__()
        self.net = net if net is not None else mlp(obs_dim, hidden, n_actions, out_gain=0.01)

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

    def sample_with_noise(self, obs: Tensor, noise: Tensor) -> Tensor:
        """Actions ``(B,)`` drawn from the same categorical with given uniform noise ``u`` ``(B,)`` in [0, 1): the
        first action whose cumulative probability exceeds ``u`` (inverse CDF; an exported policy samples alike)."""
        cdf = torch.softmax(self.net(obs), -1).cumsum(-1)
        return (cdf <= noise.unsqueeze(-1)).sum(-1).clamp(max=cdf.shape[-1] - 1)


class GaussianActor(nn.Module):
    """Box actions: diagonal Gaussian, MLP mean and state-independent log-std (initially ``log_std_init``
    for every action dimension). obs ``(B, D)``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int], log_std_init: float = 0.0):
        super().__init__()
        self.net = mlp(obs_dim, hidden, act_dim, out_gain=0.01)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))

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

    def sample_with_noise(self, obs: Tensor, noise: Tensor) -> Tensor:
        """Actions ``(B, A)`` for given standard normal noise ``(B, A)``: ``mean + std * noise``, as ``sample``."""
        return self.net(obs) + self.log_std.exp() * noise


class MultiCategoricalActor(nn.Module):
    """MultiDiscrete actions ``nvec = (n_1, ..., n_K)``: one MLP gives ``sum(nvec)`` logits, split into K independent
    softmaxes (a factorised categorical).  obs ``(B, D)``; actions ``(B, K)`` int64, component k in ``0..n_k-1`` (the
    env's ``start`` is added by :func:`core.envs.rollout.to_env_actions`).  ``log pi(a) = sum_k log p_k(a_k)``,
    entropy ``sum_k H(p_k)``: the components are independent given the observation."""

    def __init__(self, obs_dim: int, nvec: Sequence[int], hidden: Sequence[int]):
        super().__init__()
        self.nvec = tuple(int(n) for n in nvec)
        self.net = mlp(obs_dim, hidden, sum(self.nvec), out_gain=0.01)

    def _log_probs(self, obs: Tensor) -> list[Tensor]:
        """K tensors ``(B, n_k)`` of log-probabilities."""
        return [x.log_softmax(-1) for x in self.net(obs).split(self.nvec, -1)]

    def mode(self, obs: Tensor) -> Tensor:
        return torch.stack([x.argmax(-1) for x in self.net(obs).split(self.nvec, -1)], -1)

    def evaluate(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Log-prob of ``actions`` ``(B, K)`` -> ``(B,)`` and the entropy ``(B,)``, each summed over the components."""
        log_p = self._log_probs(obs)
        a = actions.long()
        logp = sum(lp.gather(-1, a[:, k:k + 1])[:, 0] for k, lp in enumerate(log_p))
        entropy = sum(-(lp.exp() * lp).sum(-1) for lp in log_p)
        return logp, entropy

    def sample(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Actions ``(B, K)`` and their log-probs ``(B,)``."""
        log_p = self._log_probs(obs)
        action = torch.stack([torch.multinomial(lp.exp(), 1)[:, 0] for lp in log_p], -1)
        logp = sum(lp.gather(-1, action[:, k:k + 1])[:, 0] for k, lp in enumerate(log_p))
        return action, logp


class BernoulliActor(nn.Module):
    """MultiBinary actions of ``n`` bits: an MLP's ``n`` logits ``x``, each bit an independent Bernoulli with
    ``p = sigmoid(x)``.  obs ``(B, D)``; actions ``(B, n)`` float 0/1.  ``log pi(a) = sum_j (a_j x_j - softplus(x_j))``
    and entropy ``sum_j (softplus(x_j) - p_j x_j)``."""

    def __init__(self, obs_dim: int, n: int, hidden: Sequence[int]):
        super().__init__()
        self.net = mlp(obs_dim, hidden, n, out_gain=0.01)

    def mode(self, obs: Tensor) -> Tensor:
        return (self.net(obs) > 0).float()

    @staticmethod
    def _logp(x: Tensor, actions: Tensor) -> Tensor:
        return (actions * x - F.softplus(x)).sum(-1)

    def evaluate(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Log-prob of ``actions`` ``(B, n)`` -> ``(B,)`` and the entropy ``(B,)``, each summed over the bits."""
        x = self.net(obs)
        entropy = (F.softplus(x) - torch.sigmoid(x) * x).sum(-1)
        return self._logp(x, actions.float()), entropy

    def sample(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Actions ``(B, n)`` float 0/1 and their log-probs ``(B,)``."""
        x = self.net(obs)
        action = (torch.rand_like(x) < torch.sigmoid(x)).float()
        return action, self._logp(x, action)


class Critic(nn.Module):
    """State value: obs ``(B, D)`` -> ``(B,)``."""

    def __init__(self, obs_dim: int, hidden: Sequence[int]):
        super().__init__()
        self.net = mlp(obs_dim, hidden, 1, out_gain=1.0)

    def forward(self, obs: Tensor) -> Tensor:
        return self.net(obs).squeeze(-1)


class SharedEncoderCritic(nn.Module):
    """Value head on the actor's encoder (CleanRL's Atari design): obs ``(B, C, H, W)`` -> ``(B,)``.

    The encoder belongs to the actor (its parameters, optimiser group and checkpoint); it is kept here
    in a list so that ``parameters()``/``state_dict()`` hold the head only, while autograd still sends
    the value loss into the encoder.  Without this sharing, a separate policy CNN learns almost only
    through the 0.01-gain logits layer: on Pong its conv gradients were ~1e-7 per weight and PPO's
    return did not move from -20 in 500k steps.
    """

    def __init__(self, encoder: nn.Module, head: nn.Module):
        super().__init__()
        self.head = head
        self._encoder = [encoder]

    def forward(self, obs: Tensor) -> Tensor:
        return self.head(self._encoder[0](obs)).squeeze(-1)


def build_networks(obs_space: gym.Space, act_space: gym.Space, hidden: Sequence[int],
                   bf16: bool = False, log_std_init: float = 0.0) -> tuple[nn.Module, nn.Module]:
    """Actor and critic for the spaces.  Flat observations (a Dict space counts as its ``gymnasium.spaces.flatten``
    size): separate MLPs of widths ``hidden`` (DAPO's decoupled optimisers act on them; Box actions start with
    log-std ``log_std_init``; MultiDiscrete and MultiBinary actions get factorised heads, independent components).
    Image observations ``(C, H, W)``: one Nature-DQN encoder owned by the actor, with a policy head and a value head
    (:class:`SharedEncoderCritic`)."""
    dict_obs = isinstance(obs_space, gym.spaces.Dict)
    obs_dim = gym.spaces.flatdim(obs_space) if dict_obs else int(np.prod(obs_space.shape))
    if not dict_obs and len(obs_space.shape) == 3:
        if not isinstance(act_space, gym.spaces.Discrete):
            raise ValueError(f"image observations need Discrete actions, got {act_space}")
        n = int(act_space.n)
        encoder = NatureCNN(512, bf16=bf16)
        actor = CategoricalActor(obs_dim, n, hidden, net=nn.Sequential(encoder, orthogonal_init(nn.Linear(512, n), 0.01)))
        return actor, SharedEncoderCritic(encoder, orthogonal_init(nn.Linear(512, 1), 1.0))
    if isinstance(act_space, gym.spaces.Discrete):
        actor = CategoricalActor(obs_dim, int(act_space.n), hidden)
    elif isinstance(act_space, gym.spaces.MultiDiscrete):
        actor = MultiCategoricalActor(obs_dim, act_space.nvec.reshape(-1).tolist(), hidden)
    elif isinstance(act_space, gym.spaces.MultiBinary):
        actor = BernoulliActor(obs_dim, int(np.prod(act_space.shape)), hidden)
    else:
        actor = GaussianActor(obs_dim, int(np.prod(act_space.shape)), hidden, log_std_init)
    return actor, Critic(obs_dim, hidden)  # built after the actor: the same init as before for a given seed
