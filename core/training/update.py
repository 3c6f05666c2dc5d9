"""One PPO-family update over the sampler's window, shared by the single- and multi-agent trainers.

The caller supplies how a minibatch is evaluated (its networks) and which clip ranges apply to it
(floats, or ``(M,)`` tensors for per-sample ranges such as per-agent clips); the epochs, advantage
normalisation, losses, gradient clipping and diagnostics live here once.  For the single-agent trainer this is the
reference backend (``TorchUpdate`` in core/training/update_backend.py), beside the NumPy one that runs on CPU MLPs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor

from core.training.distributed import Distributed
from core.algo.health import all_finite
from core.algo.losses import combined_objective, entropy_bonus, normalised_advantages, policy_loss, value_loss
from core.algo.proximal import Proximal, proximal_anchor  # noqa: F401  (proximal_anchor: older imports from here)
from core.algo.sampler import DynamicSampler

Clip = Union[float, Tensor]


class Evaluation(NamedTuple):
    """The current networks on a minibatch: ``logp``, ``entropy``, ``values``, each ``(M,)``."""

    logp: Tensor
    entropy: Tensor
    values: Tensor


@dataclass
class UpdateSettings:
    num_epochs: int
    num_minibatches: int
    minibatch_size: int
    norm_adv: bool
    vf_coef: float
    ent_coef: float
    max_grad_norm: float


def ppo_update(sampler: DynamicSampler, evaluate: Callable[[NamedTuple], Evaluation],
               optimizer: torch.optim.Optimizer, grads: GradGroups,
               clip_ranges: Callable[[NamedTuple], tuple[Clip, Clip, Optional[Clip]]],
               s: UpdateSettings, dist: Optional[Distributed] = None,
               proximal: Optional[Proximal] = None) -> tuple[dict[str, float], bool]:
    """Run ``num_epochs`` x ``num_minibatches`` gradient steps on minibatches drawn by ``sampler``.

    ``clip_ranges(mb)`` gives ``(eps_low, eps_high, eps_V or None)``.  Gradients are norm-clipped per
    network or jointly, as ``grads`` says.  Returns the ``train/`` metrics averaged over
    minibatches and ``False`` if a non-finite loss stopped the update before reaching the weights.
    With ``dist`` (data-parallel ranks) gradients are averaged across ranks and the finite-loss
    decision is taken jointly, so all ranks stay in step.  With ``proximal`` the policy ratio is taken
    against ``proximal.logp`` and each surrogate weighted by ``proximal.weight``.
    """
    data = sampler.window()
    if proximal is not None:
        data = data._replace(logp_old=proximal.logp)
    total: Optional[Tensor] = None
    names: list[str] = []
    n = 0
    for _ in range(s.num_epochs):
        for mb, weights, idx in _epoch_minibatches(sampler, data, s):
            # weights on every term (sampler.weights_scope "all") or on the surrogate only ("surrogate")
            all_weights = weights if sampler.weights_scope == "all" else None
            # statistics under the sampler's weights, not the proximal lag's: those pick the window's
            # distribution; the lag re-weights actions within it (normalised_advantages)
            adv = normalised_advantages(mb.advantages, all_weights) if s.norm_adv else mb.advantages
            ev = evaluate(mb)
            eps_low, eps_high, eps_v = clip_ranges(mb)
            surrogate_weights = weights
            if proximal is not None:
                lag = proximal.weight[idx]
                surrogate_weights = lag if weights is None else weights * lag
            pi_loss, pi_diag = policy_loss(ev.logp, mb.logp_old, adv, eps_low, eps_high, surrogate_weights)
            v_loss, v_diag = value_loss(ev.values, mb.values_old, mb.returns, eps_v, all_weights)
            entropy = entropy_bonus(ev.entropy, all_weights)
            loss = combined_objective(pi_loss, v_loss, entropy, s.vf_coef, s.ent_coef)
            finite = all_finite([loss]) if dist is None else dist.all_true(all_finite([loss]))
            if not finite:  # never let NaN/Inf reach the weights
                return _means(names, total, n), False
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if dist is not None:
                dist.average_gradients([*grads.actor, *grads.critic])
            norm_actor, norm_critic, scale_actor = clip_grad_norms_(grads, s.max_grad_norm)
            optimizer.step()
            parts = {"policy_loss": pi_loss, "value_loss": v_loss, "entropy": entropy, "loss": loss,
                     **pi_diag, **v_diag, "grad_norm_actor": norm_actor, "grad_norm_critic": norm_critic,
                     "grad_scale_actor": scale_actor}
            names = list(parts)
            stacked = torch.stack([v.detach().float() for v in parts.values()])  # one add per minibatch
            total = stacked if total is None else total + stacked
            n += 1
    return _means(names, total, n), True


def _epoch_minibatches(sampler: DynamicSampler, data: NamedTuple,
                       s: UpdateSettings) -> Iterator[tuple[NamedTuple, Optional[Tensor], Tensor]]:
    """One epoch's ``(minibatch, weights, window indices)``.  The epoch's draws are gathered from the window in one
    indexing op per field and then sliced (views), not gathered per minibatch: at minibatch 64 the
    per-op overhead, not the copying, is what costs."""
    batches = list(sampler.minibatches(s.num_minibatches, s.minibatch_size))
    idx = torch.cat([i for i, _ in batches])
    epoch = type(data)(*(x[idx] for x in data))
    start = 0
    for i, weights in batches:
        end = start + i.numel()
        yield type(data)(*(x[start:end] for x in epoch)), weights, i
        start = end


class GradGroups(NamedTuple):
    """The actor's and the critic's parameters, and whether their gradients are norm-clipped jointly
    (one optimiser, as PPO and GRPO) or each network on its own (DAPO's decoupled optimisers)."""

    actor: list[torch.nn.Parameter]
    critic: list[torch.nn.Parameter]
    joint: bool


def grad_groups(actor: torch.nn.Module, critic: torch.nn.Module, separate: bool) -> GradGroups:
    """Each network's gradient is norm-clipped on its own (``separate``) or both by one joint norm."""
    return GradGroups(list(actor.parameters()), list(critic.parameters()), joint=not separate)


def clip_grad_norms_(grads: GradGroups, max_norm: float) -> Tensor:
    """``torch.nn.utils.clip_grad_norm_`` on both networks at once (``grads.joint``) or on each, from one
    fused norm over all gradients; returns ``(||g_actor||, ||g_critic||, actor scale)`` ``(3,)``.

    Same rule as torch (scale by ``min(1, max_norm / (||g|| + 1e-6))``) from one fused norm op over all
    gradients instead of one per library call: this runs at every minibatch step (320 per MuJoCo update).
    The pre-clip norms and the factor the policy gradient was multiplied by are logged
    (``train/grad_norm_actor``, ``train/grad_norm_critic``, ``train/grad_scale_actor``): under joint
    clipping a large critic gradient also shrinks the policy's step.
    """
    actor = [p.grad for p in grads.actor if p.grad is not None]
    critic = [p.grad for p in grads.critic if p.grad is not None]
    norms = torch._foreach_norm(actor + critic) if actor or critic else []  # the op clip_grad_norm_ uses
    zero = norms[0].new_zeros(()) if norms else torch.zeros(())  # on the gradients' device

    def total(part: Sequence[Tensor]) -> Tensor:
        return torch.linalg.vector_norm(torch.stack(list(part))) if part else zero

    norm_actor, norm_critic = total(norms[:len(actor)]), total(norms[len(actor):])
    scales = []
    for group, norm in ([(actor + critic, total(norms))] if grads.joint
                        else [(actor, norm_actor), (critic, norm_critic)]):
        scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        if group:
            torch._foreach_mul_(group, scale)
        scales.append(scale)
    return torch.stack([norm_actor, norm_critic, scales[0]])


def _means(names: list[str], total: Optional[Tensor], n: int) -> dict[str, float]:
    if total is None:
        return {}
    return {f"train/{k}": v / n for k, v in zip(names, total.tolist())}
