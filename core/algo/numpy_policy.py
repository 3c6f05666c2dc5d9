"""The NumPy twins of the CPU MLP actor-critics in :mod:`core.algo.networks`, written once for NumPy acting
(core/envs/rollout.py, every env step) and the NumPy update (core/training/numpy_update.py, every minibatch).

At a few observations per step, or a minibatch of 64, a 64x64 MLP is microseconds of arithmetic while torch's
per-op dispatch costs several times more; both fast paths therefore run these float32 formulas instead of the torch
modules, which stay the reference (``tests/test_acting.py``, ``tests/test_update_backends.py``).

An MLP is a list of layers ``[(W^T (in, out), b (out,)), ...]`` with tanh between them (:func:`mlp_forward`,
:func:`mlp_backward`).  The action distribution is a head on the MLP's output (:class:`GaussianHead`,
:class:`CategoricalHead`): sampling for acting, log-probs and entropies for the update, and their gradients.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torch import nn

from core.algo.networks import HALF_LOG_2PI, CategoricalActor, Critic, GaussianActor

Array = np.ndarray
Layers = list[tuple[Array, Array]]  # [(W^T (in, out), b (out,)), ...]


def is_tanh_mlp(net: nn.Module) -> bool:
    """``nn.Sequential(Linear, Tanh, Linear, ..., Linear)``, as :func:`core.algo.networks.mlp` builds."""
    if not isinstance(net, nn.Sequential):
        return False
    layers = list(net)
    return (len(layers) % 2 == 1 and all(isinstance(m, nn.Linear) for m in layers[0::2])
            and all(isinstance(m, nn.Tanh) for m in layers[1::2]))


def supported(actor: nn.Module, critic: nn.Module, device: torch.device) -> bool:
    """CPU tanh MLPs of the kinds :func:`core.algo.networks.build_networks` makes for flat observations."""
    return (device.type == "cpu" and isinstance(actor, tuple(HEADS)) and isinstance(critic, Critic)
            and is_tanh_mlp(actor.net) and is_tanh_mlp(critic.net))


def linear_parameters(net: nn.Sequential) -> list[nn.Parameter]:
    """``[W1, b1, W2, b2, ...]`` of the net's linear layers (the order :func:`mlp_backward` returns gradients in)."""
    return [q for layer in net if isinstance(layer, nn.Linear) for q in (layer.weight, layer.bias)]


def copied_layers(net: nn.Sequential) -> Layers:
    """:data:`Layers` copied out of the torch net (C-contiguous ``W^T``), so later optimiser steps leave them be."""
    return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy()) for m in list(net)[0::2]]


def mlp_forward(layers: Layers, x: Array, inputs: Optional[list[Array]] = None) -> Array:
    """Tanh MLP: ``x (N, D) -> (N, out)``; appends every layer's input to ``inputs`` when given (for the backward)."""
    for w, b in layers[:-1]:
        if inputs is not None:
            inputs.append(x)
        x = np.tanh(x @ w + b)
    w, b = layers[-1]
    if inputs is not None:
        inputs.append(x)
    return x @ w + b


def mlp_backward(layers: Layers, inputs: list[Array], g: Array) -> list[Array]:
    """Gradients ``[dW1, db1, dW2, ...]`` (``dW`` ``(out, in)``, torch's layout) from ``g = dL/d(output)``
    ``(N, out)`` and the layer inputs :func:`mlp_forward` recorded."""
    grads = []
    for i in range(len(layers) - 1, -1, -1):
        wt, x = layers[i][0], inputs[i]
        grads += [g.sum(0), g.T @ x]
        if i > 0:
            g = (g @ wt.T) * (1.0 - x * x)  # x = tanh(previous pre-activation)
    return grads[::-1]


def side_by_side(a: Layers, c: Layers) -> Layers:
    """Two MLPs of equal depth on the same input as one: the first layers' weights side by side, the later ones
    block-diagonal, so ``mlp_forward`` of the result is ``[a(x), c(x)]`` concatenated in half the NumPy calls (each
    call's overhead, not its arithmetic, is the cost at a few rows)."""
    fused = [(np.concatenate([a[0][0], c[0][0]], 1), np.concatenate([a[0][1], c[0][1]]))]
    for (wa, ba), (wc, bc) in zip(a[1:], c[1:]):
        w = np.zeros((wa.shape[0] + wc.shape[0], wa.shape[1] + wc.shape[1]), np.float32)
        w[:wa.shape[0], :wa.shape[1]], w[wa.shape[0]:, wa.shape[1]:] = wa, wc
        fused.append((w, np.concatenate([ba, bc])))
    return fused


def log_softmax(x: Array) -> Array:
    """``x (N, n) -> log softmax (N, n)`` over the last axis, shifted by the row maximum for stability."""
    out = x - x.max(-1, keepdims=True)
    out -= np.log(np.exp(out).sum(-1, keepdims=True))
    return out


class GaussianHead:
    """Diagonal Gaussian with a state-independent log-std ``(A,)`` over the MLP's mean ``mu`` ``(N, A)``, the law of
    :class:`core.algo.networks.GaussianActor`: ``logp = sum_j(-z_j^2/2 - log_std_j - log(2 pi)/2)``,
    ``z = (a - mu) / std``; entropy ``sum_j(1/2 + log(2 pi)/2 + log_std_j)``, the same for every sample.

    ``log_std`` is read live by :meth:`log_prob` (in the update it is a view the optimiser steps in place); the
    sampling constants are taken at construction (acting copies the policy once per rollout)."""

    def __init__(self, log_std: Array):
        self.log_std = log_std
        self.std = np.exp(log_std)
        self.logp_const = np.float32(-(log_std + HALF_LOG_2PI).sum())  # logp of a = mu + std * noise, minus noise

    @staticmethod
    def parameters(actor: GaussianActor) -> list[nn.Parameter]:
        """The torch parameters the head holds beyond the MLP (the arrays :meth:`__init__` takes)."""
        return [actor.log_std]

    def sample(self, mu: Array, rng: np.random.Generator) -> tuple[Array, Array]:
        """Actions ``(N, A)`` and their log-probs ``(N,)`` (from the noise, one reduction: a hot loop)."""
        noise = rng.standard_normal(mu.shape, dtype=np.float32)
        return mu + self.std * noise, -0.5 * (noise * noise).sum(-1) + self.logp_const

    def log_prob(self, mu: Array, actions: Array) -> tuple[Array, Array]:
        """``mu (M, A)``, actions ``(M, A)`` -> logp ``(M,)``, entropy ``(M,)``; keeps ``z`` for :meth:`backward`."""
        self.inv_std = np.exp(-self.log_std)
        self.z = (actions - mu) * self.inv_std
        logp = (-0.5 * self.z * self.z - self.log_std - HALF_LOG_2PI).sum(-1)
        return logp, np.full(mu.shape[0], (0.5 + HALF_LOG_2PI + self.log_std).sum(), dtype=np.float32)

    def backward(self, g_logp: Array, g_entropy: Array) -> tuple[Array, list[Array]]:
        """dL/dlogp, dL/dentropy ``(M,)`` -> dL/dmu ``(M, A)`` and ``[dL/dlog_std (A,)]``:
        dlogp/dmu = z / std, dlogp/dlog_std = z^2 - 1, dH/dlog_std = 1."""
        g_mu = g_logp[:, None] * self.z * self.inv_std
        g_log_std_entropy = np.full_like(self.log_std, g_entropy.sum())
        return g_mu, [(g_logp[:, None] * (self.z * self.z - 1.0)).sum(0) + g_log_std_entropy]


class CategoricalHead:
    """Softmax over the MLP's logits ``(N, n)``, the law of :class:`core.algo.networks.CategoricalActor`:
    ``logp = log_softmax(x)[a]``, entropy ``-sum_k p_k log p_k``.  No parameters of its own."""

    def __init__(self) -> None:
        pass

    @staticmethod
    def parameters(actor: CategoricalActor) -> list[nn.Parameter]:
        return []

    def sample(self, logits: Array, rng: np.random.Generator) -> tuple[Array, Array]:
        """Actions ``(N,)`` int64 by the inverse CDF of one uniform each, and their log-probs ``(N,)``."""
        log_p = log_softmax(logits)
        u = rng.random((logits.shape[0], 1), dtype=np.float32)
        action = (np.exp(log_p).cumsum(-1) < u).sum(-1).clip(max=logits.shape[1] - 1)
        return action, np.take_along_axis(log_p, action[:, None], -1)[:, 0]

    def log_prob(self, logits: Array, actions: Array) -> tuple[Array, Array]:
        """logits ``(M, n)``, actions ``(M,)`` -> logp ``(M,)``, entropy ``(M,)``; keeps ``p`` for :meth:`backward`."""
        self.log_p = log_softmax(logits)                                            # (M, n)
        self.p = np.exp(self.log_p)
        self.rows, self.actions = np.arange(len(actions)), actions.astype(np.int64)
        self.entropy = -(self.p * self.log_p).sum(-1)
        return self.log_p[self.rows, self.actions], self.entropy

    def backward(self, g_logp: Array, g_entropy: Array) -> tuple[Array, list[Array]]:
        """dlogp/dx = onehot(a) - p; dH/dx_j = -p_j (log p_j + H)."""
        g_x = -self.p * (g_logp[:, None] + g_entropy[:, None] * (self.log_p + self.entropy[:, None]))
        g_x[self.rows, self.actions] += g_logp
        return g_x, []


HEADS = {GaussianActor: GaussianHead, CategoricalActor: CategoricalHead}  # the actor classes the NumPy paths know


def head_class(actor: nn.Module) -> type:
    """:class:`GaussianHead` or :class:`CategoricalHead` for ``actor``."""
    return next(head for kind, head in HEADS.items() if isinstance(actor, kind))
