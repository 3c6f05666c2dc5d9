"""The Decision Transformer's losses as pure functions (docs/algorithms.md): per-token ``(B, K)`` tensors with a
padding mask (cross-entropy for Discrete actions, squared error for Box actions); DAPO-DT's exponential advantage
weights.  Used only by this family, so they live here."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def exponential_advantage_weights(adv: Tensor, temperature: float, max_weight: float) -> Tensor:
    """AWR-style per-sample weights ``min(exp(A / T), max_weight)`` (Peng et al. 2019), any shape.

    Exponential, not ``|A|``: ``|A|`` would imitate a very *bad* action (large negative A) more strongly
    than an average one, while ``exp(A/T)`` shrinks its weight towards 0 and grows it only for actions
    better than expected (docs/algorithms.md).  ``max_weight`` bounds the few huge weights that would otherwise
    dominate a batch.  ``A/T`` is clamped at ``log(max_weight)`` *before* ``exp`` so large advantages
    cannot overflow to ``inf`` (same result as clamping after).

    The result is detached: the weights scale an imitation loss and must not send gradients into
    whatever produced ``adv`` (e.g. a value head would learn to shrink the loss instead of predicting V).
    """
    if temperature <= 0 or max_weight <= 0:
        raise ValueError(f"temperature and max_weight must be > 0, got {temperature} and {max_weight}")
    return (adv.detach() / temperature).clamp(max=math.log(max_weight)).exp()


def weighted_action_loss(logits: Tensor, actions: Tensor, weights: Tensor | None,
                         mask: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """Per-token action cross-entropy, weighted and averaged over real tokens: ``sum(m*w*ce) / sum(m)``.

    Normalised by the number of real tokens, not by ``sum(m*w)``, so that the weights change the
    loss scale the way the weighting intends (as in ``policy_loss``), and padding never counts.

    Args: logits ``(B, K, A)``; actions ``(B, K)`` long (values at padded tokens are ignored);
        weights ``(B, K)`` or ``None`` (all 1); mask ``(B, K)`` bool/float, 1 = real token.
    Returns: loss ``()``, diagnostics: action_accuracy, weight_mean, weight_max over the real tokens.
    """
    real = mask.bool()
    # Padded tokens may carry any placeholder action (e.g. -1); give CE a valid index there.
    safe_actions = torch.where(real, actions, torch.zeros_like(actions))
    ce = F.cross_entropy(logits.flatten(0, 1), safe_actions.flatten(), reduction="none").view_as(actions)  # (B, K)
    w = torch.ones_like(ce) if weights is None else weights.to(ce.dtype)
    n_real = real.sum().clamp_min(1)
    # where(), not a product with the mask: a NaN at a padded token must not leak into the sum.
    loss = torch.where(real, w * ce, torch.zeros_like(ce)).sum() / n_real
    with torch.no_grad():
        correct = (logits.argmax(-1) == actions) & real
        w_real = torch.where(real, w, torch.zeros_like(w))
        diag = {
            "action_accuracy": correct.sum() / n_real,
            "weight_mean": w_real.sum() / n_real,
            "weight_max": torch.where(real, w, torch.full_like(w, -math.inf)).max(),
        }
    return loss, diag


def weighted_mse_action_loss(pred: Tensor, actions: Tensor, weights: Tensor | None,
                             mask: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """Per-token squared error of Box actions (DT paper, continuous control), weighted and averaged over real tokens
    by the rule of :func:`weighted_action_loss`: ``sum(m * w * se) / sum(m)`` with ``se_t = mean_j (pred_tj - a_tj)^2``
    (the mean over the action's ``A`` dimensions, so with all weights 1 this is the paper's mean squared error).

    Args: pred ``(B, K, A)`` the tanh head's actions in [-1, 1]; actions ``(B, K, A)`` dataset actions scaled to
        [-1, 1] (values at padded tokens are ignored); weights ``(B, K)`` or ``None`` (all 1); mask ``(B, K)``
        bool/float, 1 = real token.
    Returns: loss ``()``, diagnostics: action_mse (unweighted, over real tokens), weight_mean, weight_max.
    """
    real = mask.bool()
    # Padded tokens are zeroed before squaring: a NaN there must leak neither into the loss nor into its gradient.
    diff = torch.where(real.unsqueeze(-1), pred.float() - actions.float(), torch.zeros((), device=pred.device))
    se = (diff ** 2).mean(-1)  # (B, K)
    w = torch.ones_like(se) if weights is None else weights.to(se.dtype)
    n_real = real.sum().clamp_min(1)
    zero = torch.zeros_like(se)
    loss = torch.where(real, w * se, zero).sum() / n_real  # where(): nor a NaN weight at a padded token
    with torch.no_grad():
        diag = {
            "action_mse": torch.where(real, se, zero).sum() / n_real,
            "weight_mean": torch.where(real, w, zero).sum() / n_real,
            "weight_max": torch.where(real, w, torch.full_like(w, -math.inf)).max(),
        }
    return loss, diag


def action_loss(out: Tensor, actions: Tensor, weights: Tensor | None, mask: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """:func:`weighted_action_loss` for Discrete actions (``actions`` ``(B, K)`` long), else
    :func:`weighted_mse_action_loss` (``actions`` ``(B, K, A)`` float)."""
    if actions.dtype == torch.long:
        return weighted_action_loss(out, actions, weights, mask)
    return weighted_mse_action_loss(out, actions, weights, mask)


def masked_normalise(x: Tensor, mask: Tensor) -> Tensor:
    """``(x - mean) / std`` over the real (mask=1) entries of ``x`` ``(B, K)``; padding gives 0."""
    real = x[mask]
    if real.numel() < 2:
        return torch.zeros_like(x)
    return torch.where(mask, (x - real.mean()) / (real.std() + 1e-8), torch.zeros_like(x))
