"""Losses of critic-free RL for sequence generation: GRPO (Shao et al. 2024), DAPO (Yu et al. 2025, arXiv
2503.14476) and Dr. GRPO (Liu et al. 2025, arXiv 2503.20783), as pure functions (docs/algorithms.md, section 8).

Shapes: ``P`` prompt groups of ``G`` answers each, ``N = P * G`` answers, ``T`` response tokens (right-padded;
``mask`` marks the tokens that count).  Every aggregation takes the *whole* optimiser batch's normaliser
(:func:`batch_normaliser`), so that a batch cut into micro-batches for gradient accumulation gives, summed, exactly
the loss of the uncut batch: the bug of averaging per-micro-batch means (each micro-batch's tokens weighted by
its own count) is what this rules out.
"""
from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
CONSTANT_ATOL = 1e-6  # rewards within this of each other count as equal (float noise, e.g. 1.0 vs 1.0 + 1e-9)


def constant_groups(rewards: Tensor, atol: float = CONSTANT_ATOL) -> Tensor:
    """``(P, G)`` rewards -> ``(P,)`` bool: the group's rewards are all equal up to ``atol`` (max - min <= atol).

    A spread test, not ``std > 0``: rewards assembled from floats (a length penalty added, a sum in another
    order) differ in the last bits, and ``std / std`` would turn that noise into advantages of size ~1."""
    return (rewards.amax(-1) - rewards.amin(-1)) <= atol


def group_advantages(rewards: Tensor, std_normalise: bool = True, atol: float = CONSTANT_ATOL,
                     eps: float = 1e-6) -> Tensor:
    """Group-relative advantages ``(P, G)``: ``A = r - mean_group(r)``, divided by the group's std (ddof 1, as
    GRPO's reference implementations) when ``std_normalise`` (GRPO, DAPO) or not (Dr. GRPO).

    Groups whose rewards are constant (:func:`constant_groups`) get exactly 0: they carry no signal.
    Args: rewards ``(P, G)`` float with ``G >= 2``."""
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be (P, G) with G >= 2, got {tuple(rewards.shape)}")
    adv = rewards - rewards.mean(-1, keepdim=True)
    if std_normalise:
        adv = adv / (rewards.std(-1, keepdim=True) + eps)
    return torch.where(constant_groups(rewards, atol)[:, None], torch.zeros_like(adv), adv)


def clipped_token_surrogate(logp_new: Tensor, logp_old: Tensor, adv: Tensor, eps_low: float,
                            eps_high: float) -> tuple[Tensor, dict[str, Tensor]]:
    """Per-token clipped surrogate ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)``, ``r = exp(logp_new -
    logp_old)``, not yet aggregated.  ``eps_high > eps_low`` is DAPO's clip-higher: room for unlikely tokens of
    good answers to grow, which keeps entropy from collapsing (Yu et al. 2025, section 3.1).

    Args: logp_new, logp_old ``(N, T)``; adv ``(N,)`` (one per answer, broadcast over its tokens) or ``(N, T)``.
    Returns: loss ``(N, T)`` and per-token bool masks ``clipped_low`` (A < 0 and r < 1 - eps_low: the lower bound
    binds) and ``clipped_high`` (A > 0 and r > 1 + eps_high), plus ``ratio`` (detached)."""
    if adv.dim() == 1:
        adv = adv[:, None]
    ratio = (logp_new - logp_old).exp()
    loss = -torch.min(ratio * adv, ratio.clamp(1 - eps_low, 1 + eps_high) * adv)
    with torch.no_grad():
        diag = {"clipped_low": (adv < 0) & (ratio < 1 - eps_low), "clipped_high": (adv > 0) & (ratio > 1 + eps_high),
                "ratio": ratio.detach()}
    return loss, diag


def batch_normaliser(mask: Tensor, aggregation: str, max_len: int) -> float:
    """The constant that :func:`aggregate` divides by, computed once over the whole optimiser batch ``mask``
    ``(N, T)``: its token count (token-mean), its answer count (seq-mean-token-mean: the mean over answers of
    per-answer means) or answers x ``max_len`` (Dr. GRPO's constant)."""
    if aggregation == "token-mean":
        return float(mask.sum().clamp_min(1))
    if aggregation == "seq-mean-token-mean":
        return float(max(mask.shape[0], 1))
    if aggregation == "seq-mean-token-sum-norm":
        return float(max(mask.shape[0], 1) * max_len)
    raise ValueError(f"unknown aggregation '{aggregation}'; choose one of: {', '.join(AGGREGATIONS)}")


def aggregate(loss: Tensor, mask: Tensor, aggregation: str, normaliser: float) -> Tensor:
    """A (micro-)batch's share of the batch loss, a scalar; summed over the micro-batches of one batch it is the
    batch's loss whatever the cut, because ``normaliser`` (:func:`batch_normaliser`) belongs to the whole batch.

    - ``token-mean`` (DAPO): ``sum_i sum_t m_it l_it / sum_it m_it``: every token weighs the same, so a long
      answer's tokens are not diluted (Yu et al. 2025, section 3.3).
    - ``seq-mean-token-mean`` (GRPO as DeepSeek wrote it): ``(1/N) sum_i (sum_t m_it l_it / |o_i|)``: every answer
      weighs the same, its tokens share that weight.
    - ``seq-mean-token-sum-norm`` (Dr. GRPO): ``sum_it m_it l_it / (N * max_len)``: no length bias at all.

    An answer with no counted token (all masked, e.g. a truncated one under overlong filtering) adds 0 and still
    counts in N for the per-answer forms.  Args: loss, mask ``(n, T)`` (``n`` answers of the micro-batch)."""
    m = mask.to(loss.dtype)
    masked = torch.where(mask.bool(), loss, torch.zeros_like(loss))  # a NaN at a padded token must not leak
    if aggregation == "seq-mean-token-mean":
        per_answer = masked.sum(-1) / m.sum(-1).clamp_min(1)
        return per_answer.sum() / normaliser
    if aggregation in ("token-mean", "seq-mean-token-sum-norm"):
        return masked.sum() / normaliser
    raise ValueError(f"unknown aggregation '{aggregation}'; choose one of: {', '.join(AGGREGATIONS)}")


def overlong_penalty(lengths: Tensor, max_len: int, buffer: int) -> Tensor:
    """DAPO's soft overlong punishment ``(N,)`` for response lengths ``(N,)`` (tokens, EOS included): 0 up to
    ``max_len - buffer``, then falling linearly to -1 at ``max_len``, -1 beyond (Yu et al. 2025, eq. 13)."""
    if not 0 < buffer <= max_len:
        raise ValueError(f"buffer must be in 1 .. max_len ({max_len}), got {buffer}")
    free = max_len - buffer
    over = (lengths.to(torch.float32) - free).clamp_min(0)
    return -(over / buffer).clamp(max=1.0)


def response_mask(lengths: Tensor, width: int, truncated: Tensor, filter_truncated: bool) -> Tensor:
    """``(N, width)`` bool: the first ``lengths[i]`` tokens of each response, and none of a truncated response's
    (no EOS within the limit) when ``filter_truncated`` (DAPO's overlong filtering: an answer cut off is not
    known to be wrong, so it is not taught as wrong).  Args: lengths ``(N,)`` long, truncated ``(N,)`` bool."""
    positions = torch.arange(width, device=lengths.device)[None, :]
    mask = positions < lengths[:, None]
    return mask & ~truncated[:, None] if filter_truncated else mask
