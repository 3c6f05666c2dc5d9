"""PPO-family losses as pure functions (docs/algorithms.md).

Every function takes flat minibatch tensors of shape ``(M,)`` and returns a scalar loss plus a
dict of detached diagnostics.  ``weights`` (``(M,)`` or ``None``) are per-sample multipliers such
as the sampler's importance weights; the weighted loss is ``mean(w * l)`` (not self-normalised), so
weights with expectation 1 under the sampling distribution keep the loss scale and stay unbiased.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from core.algo.advantages import explained_variance


def _mean(x: Tensor, weights: Optional[Tensor]) -> Tensor:
    return x.mean() if weights is None else (x * weights).mean()


def normalised_advantages(adv: Tensor, weights: Optional[Tensor] = None, eps: float = 1e-8) -> Tensor:
    """``(A - mean) / (std + eps)`` for one minibatch ``(M,)``, the statistics taken under the per-sample
    ``weights`` ``(M,)`` that the policy loss uses (``None``: the plain mean and the ``ddof=1`` std).

    The sampler's weights say which distribution over the window the minibatch estimates: draws from ``p``
    with ``1/(N p_i)`` stand for the uniform window, a permutation with ``N p_i`` for ``p``.  The draws are
    skewed towards large ``|A|``, so their plain std is that of ``p``, not of the distribution the loss
    targets, and the gradient was scaled by the ratio of the two (issue 46: 0.65x with importance
    correction, 1.5x with ``weighted`` resampling; ``tests/test_normalised_weights.py``).  Here the mean is
    self-normalised, ``mu = sum w A / sum w``, and the variance ``sum w (A - mu)^2 / (V1 - V2 / V1)``
    (``V1 = sum w``, ``V2 = sum w^2``) is the reliability-weights form of Bessel's correction
    (``V1^2 / V2`` is Kish's effective sample size): equal weights give exactly the plain statistics.
    Both are ratio estimators, consistent rather than exactly unbiased (a bias of order ``1/M``).
    """
    if weights is None:
        return (adv - adv.mean()) / (adv.std() + eps)
    v1 = weights.sum()
    mean = (weights * adv).sum() / v1
    var = (weights * (adv - mean).square()).sum() / (v1 - weights.square().sum() / v1)
    return (adv - mean) / (var.sqrt() + eps)


def policy_loss(logp_new: Tensor, logp_old: Tensor, adv: Tensor, eps_low: float, eps_high: float,
                weights: Optional[Tensor] = None) -> tuple[Tensor, dict[str, Tensor]]:
    """Clipped surrogate ``-E[min(r*A, clip(r, 1-eps_low, 1+eps_high)*A)]``, ``r = exp(logp_new - logp_old)``.

    ``eps_low == eps_high`` is PPO's symmetric clip; ``eps_high > eps_low`` is DAPO's clip-higher
    (Yu et al. 2025), which lets low-probability actions grow faster and keeps entropy up.

    Args: logp_new, logp_old, adv: ``(M,)``.
    Returns: loss ``()``, diagnostics: clip_fraction, approx_kl (the k3 estimator
    ``E[(r-1) - log r]``, Schulman 2020), ratio_mean, ratio_min, ratio_max.
    """
    log_ratio = logp_new - logp_old
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * adv, ratio.clamp(1 - eps_low, 1 + eps_high) * adv)
    loss = -_mean(surrogate, weights)
    with torch.no_grad():
        clipped = (ratio < 1 - eps_low) | (ratio > 1 + eps_high)
        diag = {
            "clip_fraction": clipped.float().mean(),
            "approx_kl": ((ratio - 1) - log_ratio).mean(),
            "ratio_mean": ratio.mean(),
            "ratio_min": ratio.min(),
            "ratio_max": ratio.max(),
        }
    return loss, diag


def value_loss(v_new: Tensor, v_old: Tensor, returns: Tensor, eps: Optional[float],
               weights: Optional[Tensor] = None) -> tuple[Tensor, dict[str, Tensor]]:
    """``E[(V-R)^2]``, or with ``eps``: ``E[max((V-R)^2, (V_clip-R)^2)]``,
    ``V_clip = V_old + clip(V - V_old, -eps, eps)``.

    The *prediction* is clipped around the stored ``V_old`` (docs/algorithms.md); clamping the loss value
    itself, as a widely copied snippet does, is a bug.

    Args: v_new, v_old, returns: ``(M,)``; eps: value clip range or ``None`` for no clipping.
    Returns: loss ``()``, diagnostics: value_clip_fraction, explained_variance (of ``v_new``).
    """
    err = (v_new - returns).pow(2)
    if eps is None:
        per_sample = err
        clip_frac = torch.zeros((), device=v_new.device)
    else:
        v_clip = v_old + (v_new - v_old).clamp(-eps, eps)
        per_sample = torch.max(err, (v_clip - returns).pow(2))
        clip_frac = ((v_new - v_old).abs() > eps).float().mean().detach()
    diag = {"value_clip_fraction": clip_frac,
            "explained_variance": explained_variance(v_new.detach(), returns)}
    return _mean(per_sample, weights), diag


def entropy_bonus(entropy: Tensor, weights: Optional[Tensor] = None) -> Tensor:
    """Mean policy entropy ``H`` over the minibatch; ``entropy`` is ``(M,)``."""
    return _mean(entropy, weights)


def combined_objective(pi_loss: Tensor, v_loss: Tensor, entropy: Tensor, vf_coef: float,
                       ent_coef: float) -> Tensor:
    """``L = L_pi + vf_coef * L_V - ent_coef * H`` (for DAPO ``vf_coef`` is the balance ``lam``)."""
    return pi_loss + vf_coef * v_loss - ent_coef * entropy
