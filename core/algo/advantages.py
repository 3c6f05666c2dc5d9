"""Generalised Advantage Estimation, and GRPO's automatic lambda with the explained variance it reads
(docs/algorithms.md)."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def explained_variance(pred: Tensor, target: Tensor) -> Tensor:
    """``1 - Var(target - pred) / Var(target)``; NaN when the target is constant. Shapes ``(M,)``."""
    var_t = target.var(unbiased=False)
    ev = 1 - (target - pred).var(unbiased=False) / var_t.clamp_min(1e-30)
    return torch.where(var_t > 0, ev, torch.full_like(ev, float("nan")))  # no host sync on GPU


def next_state_values(values: Tensor, last_values: Tensor, dones: Tensor, final_values: Tensor) -> Tensor:
    """Value of the true successor state ``s_{t+1}`` of every stored step.

    With same-step autoreset the observation after an episode end is already the next episode's
    first one, so where ``dones[t]`` the successor is the episode's final observation, whose value
    the collector computed separately (``final_values``).

    Args: values ``(T, N)`` = V(s_t); last_values ``(N,)`` = V of the observation after the rollout;
      dones ``(T, N)`` bool, episode ended at t (terminated or truncated); final_values ``(T, N)``,
      read only where ``dones``.
    Returns: ``(T, N)``.
    """
    shifted = torch.cat([values[1:], last_values.unsqueeze(0)], dim=0)
    return torch.where(dones, final_values, shifted)


def gae(rewards: Tensor, values: Tensor, next_values: Tensor, terminated: Tensor, dones: Tensor,
        gamma: float, lam: float) -> tuple[Tensor, Tensor]:
    """GAE(gamma, lambda) (Schulman et al. 2016), vectorised over envs.

    ``delta_t = r_t + gamma * V(s_{t+1}) * (1 - terminated_t) - V(s_t)`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}``.  A truncated step (time limit) still
    bootstraps from the value of its final observation; a terminated one does not.  Both stop the
    recursion, because the next stored step belongs to another episode.

    Args: rewards, values, next_values ``(T, N)``; terminated, dones ``(T, N)`` bool.
    Returns: advantages ``(T, N)`` and returns ``R_t = A_t + V(s_t)`` ``(T, N)``.
    """
    not_term = (~terminated).to(values.dtype)
    carry = gamma * lam * (~dones).to(values.dtype)
    deltas = rewards + gamma * next_values * not_term - values
    adv = torch.empty_like(values)
    running = torch.zeros_like(values[0])
    for t in range(values.shape[0] - 1, -1, -1):
        running = deltas[t] + carry[t] * running
        adv[t] = running
    return adv, adv + values


class AutoLambda:
    """GRPO's lambda rule: trust a good critic with more bootstrapping (docs/algorithms.md).

    ``target = lambda_max - (lambda_max - lambda_min) * clip(EV, 0, 1)`` where EV is the explained
    variance of ``V_old`` against the returns; ``lambda <- 0.9 * lambda + 0.1 * target`` (EMA).
    A NaN EV (constant returns) leaves lambda unchanged.

    The returns are the lambda-returns ``A + V_old``, which bootstrap from ``V_old`` itself, so a lower lambda
    raises the EV a little.  On Walker2d the critic's EV passes 0.95 after ~35k steps (at 200k: 0.99, and
    0.93-0.95 even against lambda = 1 returns, experiments/lambda_rule_ev.py), so lambda sits at ``lambda_min``
    from ~70k steps on (0.900-0.903 in every run checked; a 0.95 floor, which then pins it at 0.95, scored level:
    experiments/results/mujoco_1M/walker2d_only/ablation).
    """

    def __init__(self, init: float, lambda_min: float, lambda_max: float, smoothing: float = 0.9):
        self.value, self.lambda_min, self.lambda_max, self.smoothing = init, lambda_min, lambda_max, smoothing

    def update(self, explained_var: float) -> float:
        if not math.isnan(explained_var):
            ev = min(max(explained_var, 0.0), 1.0)
            target = self.lambda_max - (self.lambda_max - self.lambda_min) * ev
            self.value = self.smoothing * self.value + (1 - self.smoothing) * target
        return self.value

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, state: dict) -> None:
        self.value = state["value"]
