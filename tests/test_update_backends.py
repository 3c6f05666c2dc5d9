"""One table of hand-worked update cases, run against both update backends (``core/training/update_backend.py``).

Every case is one minibatch of four samples and one Adam step on networks small enough to work by hand: a linear
actor (obs dim 1: ``mu = w x + b`` with log-std 0, or logits ``W x + b`` over 3 actions) and a linear critic
``V = 0.5 x``.  Each row gives the loss parts worked out by hand (the literals, derived in the comments), and
:func:`closed_form` gives the gradient of ``L = L_pi + vf_coef L_V - ent_coef H`` and so the parameter change, by
per-sample formulas written out here rather than by either backend's code.  The torch reference
(:class:`~core.training.update_backend.TorchUpdate`) and the NumPy backend
(:class:`~core.training.numpy_update.NumpyUpdate`) must both meet every row, and each other to float32 precision.

The standard minibatch (as in tests/test_losses.py): ratios ``r = (0.5, 1, 1.25, 1.5)``, advantages
``A = (1, -1, 1, -1)``.  With ``eps = 0.2`` (range [0.8, 1.2]): ``min(rA, clip(r)A) = (0.5, -1, 1.2, -1.5)``, sum
-0.8, ``L_pi = 0.2``; only ``r = 1.25`` (clipped) carries no gradient; clip fraction 3/4 (0.5, 1.25, 1.5 outside).
Clip-higher ``eps_high = 0.28`` (range [0.8, 1.28]): ``(0.5, -1, 1.25, -1.5)``, ``L_pi = 0.75 / 4 = 0.1875``, every
sample carries gradient; clip fraction 2/4.
Critic: ``x = (1, -1, 2, 0.5)``, ``V = (0.5, -0.5, 1, 0.25)``, returns ``R = (1.5, -0.5, 0.25, 0.25)``:
``(V - R)^2 = (1, 0, 0.5625, 0)``, ``L_V = 1.5625 / 4 = 0.390625``.  With ``eps_V = 0.2`` around ``V_old = (0.5, 0, 1.5, 0.25)``:
``V_clip = (0.5, -0.2, 1.3, 0.25)``, ``(V_clip - R)^2 = (1, 0.09, 1.1025, 0)``, the max per sample
``(1, 0.09, 1.1025, 0)``, ``L_V = 2.1925 / 4 = 0.548125``; samples 2 and 3 take the clipped branch (no gradient), value
clip fraction 2/4.
Entropy: Gaussian ``1/2 + log(2 pi)/2 = 1.4189385`` per sample; categorical ``p = (1/2, 1/4, 1/4)``:
``H = (1/2) log 2 + 2 (1/4) log 4 = 1.5 log 2 = 1.0397208``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pytest
import torch

from core.algo.networks import CategoricalActor, Critic, GaussianActor
from core.algo.proximal import Proximal
from core.algo.sampler import Transitions
from core.training.numpy_update import NumpyUpdate
from core.training.update import UpdateSettings
from core.training.update_backend import TorchUpdate

M = 4
X = np.array([1.0, -1.0, 2.0, 0.5])
RATIOS = np.array([0.5, 1.0, 1.25, 1.5])
ADV = np.array([1.0, -1.0, 1.0, -1.0])
RETURNS, V_OLD = np.array([1.5, -0.5, 0.25, 0.25]), np.array([0.5, 0.0, 1.5, 0.25])
W_CRITIC = 0.5
Z_GAUSS = np.array([1.0, -1.0, 0.5, 2.0])  # (a - mu) / std of each stored action
P_CAT, ACTIONS_CAT = np.array([0.5, 0.25, 0.25]), np.array([0, 1, 2, 0])
H_GAUSS, H_CAT = 0.5 + 0.5 * math.log(2 * math.pi), 1.5 * math.log(2)
VF_COEF, ENT_COEF, LR_ACTOR, LR_CRITIC, ADAM_EPS = 0.5, 0.01, 0.1, 0.05, 1.0  # eps 1: the step shows |g|, not sign(g)
BACKENDS = {"torch": TorchUpdate, "numpy": NumpyUpdate}


@dataclass
class Case:
    discrete: bool
    hand: dict  # loss parts worked out by hand (the module docstring and the comments in CASES)
    eps: tuple = (0.2, 0.2, None)  # eps_low, eps_high, eps_V
    weights: Optional[list] = None  # the sampler's weights
    scope: str = "all"  # where they act: every term, or the surrogate only
    lag: Optional[list] = None  # proximal weights pi_prox / pi_behaviour (the ratio is then taken against pi_prox)
    max_grad_norm: float = 10.0  # 10: no clipping
    separate: bool = False
    norm_adv: bool = False
    extra: dict = field(default_factory=dict)


W_IMP = [0.5, 1.5, 1.0, 2.0]
LAG = [2.0, 0.5, 1.0, 1.5]
CASES = {
    "gaussian-ppo": Case(False, dict(policy_loss=0.2, value_loss=0.390625, entropy=H_GAUSS, clip_fraction=0.75,
                                     value_clip_fraction=0.0, grad_scale_actor=1.0)),
    "gaussian-value-clip": Case(False, dict(policy_loss=0.2, value_loss=0.548125, value_clip_fraction=0.5),
                                eps=(0.2, 0.2, 0.2)),
    "gaussian-clip-higher": Case(False, dict(policy_loss=0.1875, clip_fraction=0.5), eps=(0.2, 0.28, None)),
    # w * surrogate = (0.25, -1.5, 1.2, -3): L_pi = 3.05 / 4; w (V - R)^2 = (0.5, 0, 0.5625, 0): L_V = 0.265625; H sum(w) / 4
    "gaussian-importance-weights": Case(False, dict(policy_loss=0.7625, value_loss=0.265625, entropy=1.25 * H_GAUSS),
                                        weights=W_IMP),
    "gaussian-weights-on-surrogate": Case(False, dict(policy_loss=0.7625, value_loss=0.390625, entropy=H_GAUSS),
                                          weights=W_IMP, scope="surrogate"),
    # lag * surrogate = (1, -0.5, 1.2, -2.25): L_pi = 0.55 / 4; the ratio is r against pi_prox, not logp_old
    "gaussian-proximal": Case(False, dict(policy_loss=0.1375, clip_fraction=0.75, value_loss=0.390625), lag=LAG),
    "gaussian-joint-grad-clip": Case(False, dict(policy_loss=0.2), max_grad_norm=0.05),
    "gaussian-separate-grad-clip": Case(False, dict(policy_loss=0.2), max_grad_norm=0.05, separate=True),
    # A normalised: mean 0, std (ddof 1) sqrt(4/3), A' = A * sqrt(3)/2: L_pi = 0.2 * sqrt(3) / 2
    "gaussian-normalised-advantages": Case(False, dict(policy_loss=0.1 * math.sqrt(3)), norm_adv=True),
    "categorical-ppo": Case(True, dict(policy_loss=0.2, value_loss=0.390625, entropy=H_CAT, clip_fraction=0.75)),
    "categorical-clip-higher-value-clip": Case(True, dict(policy_loss=0.1875, value_loss=0.548125, clip_fraction=0.5,
                                                          value_clip_fraction=0.5), eps=(0.2, 0.28, 0.2)),
    # w * lag = (1, 0.75, 1, 3) on the surrogate: (0.5, -0.75, 1.2, -4.5), L_pi = 3.55 / 4; w alone on L_V and H
    "categorical-weights-and-proximal": Case(True, dict(policy_loss=0.8875, value_loss=0.265625, entropy=1.25 * H_CAT),
                                             weights=W_IMP, lag=LAG),
    "categorical-joint-grad-clip": Case(True, dict(policy_loss=0.2), max_grad_norm=0.02, eps=(0.2, 0.2, 0.2)),
    "categorical-separate-grad-clip": Case(True, dict(policy_loss=0.2), max_grad_norm=0.02, separate=True,
                                           eps=(0.2, 0.2, 0.2)),
}


class OneMinibatch:
    """The sampler interface the backends read: the whole window as one minibatch, with the case's weights."""

    def __init__(self, data: Transitions, weights: Optional[torch.Tensor], scope: str):
        self.data, self.weights, self.weights_scope = data, weights, scope

    def window(self) -> Transitions:
        return self.data

    def minibatches(self, num_minibatches: int, minibatch_size: int):
        yield torch.arange(M), self.weights


def _behaviour_logp(case: Case) -> np.ndarray:
    """log pi(a_i | x_i) of the networks below, by hand: ``-z^2/2 - log(2 pi)/2`` or ``log p[a]``."""
    return np.log(P_CAT[ACTIONS_CAT]) if case.discrete else -0.5 * Z_GAUSS ** 2 - 0.5 * math.log(2 * math.pi)


def build(case: Case):
    """The networks, optimiser, sampler and proximal anchor of one case (float32)."""
    f32 = lambda x: torch.tensor(np.asarray(x), dtype=torch.float32)  # noqa: E731
    critic = Critic(1, ())
    with torch.no_grad():
        critic.net[0].weight.fill_(W_CRITIC), critic.net[0].bias.zero_()
    if case.discrete:
        actor = CategoricalActor(1, 3, ())
        with torch.no_grad():
            actor.net[0].weight.zero_(), actor.net[0].bias.copy_(f32(np.log(P_CAT)))
        actions = torch.tensor(ACTIONS_CAT)
    else:
        actor = GaussianActor(1, 1, ())
        with torch.no_grad():
            actor.net[0].weight.fill_(0.5), actor.net[0].bias.zero_()
        actions = f32(0.5 * X + Z_GAUSS)[:, None]
    anchor = _behaviour_logp(case) - np.log(RATIOS)  # the log-probs the ratios are taken against
    proximal = None
    if case.lag is not None:  # the stored logp_old is a decoy: a backend that used it would see other ratios
        proximal = Proximal(f32(anchor), f32(case.lag))
        anchor = anchor - 1.0
    data = Transitions(f32(X)[:, None], actions, f32(anchor), f32(V_OLD), f32(ADV), f32(RETURNS))
    opt = torch.optim.Adam([{"params": actor.parameters(), "lr": LR_ACTOR},
                            {"params": critic.parameters(), "lr": LR_CRITIC}], eps=ADAM_EPS, fused=True)
    weights = None if case.weights is None else f32(case.weights)
    return actor, critic, opt, OneMinibatch(data, weights, case.scope), proximal


def settings(case: Case) -> UpdateSettings:
    return UpdateSettings(num_epochs=1, num_minibatches=1, minibatch_size=M, norm_adv=case.norm_adv,
                          vf_coef=VF_COEF, ent_coef=ENT_COEF, max_grad_norm=case.max_grad_norm)


def closed_form(case: Case) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The ``train/`` metrics and the change of every parameter (by name) after the one Adam step, in float64.

    dL/dlogp_i = -(s_i / M) A_i r_i where the unclipped term is the smaller one (else 0), s_i the surrogate weight;
    Gaussian: dlogp/dmu = z / std, dlogp/dlog_std = z^2 - 1, dH/dlog_std = 1; categorical: dlogp/dlogit_k =
    [k = a] - p_k, dH/dlogit_k = -p_k (log p_k + H); value: d(V - R)^2/dV = 2 (V - R) on the branch the max takes.
    The first Adam step moves a parameter by ``-lr g / (|g| + eps)`` (bias corrections cancel)."""
    eps_low, eps_high, eps_v = case.eps
    w = np.ones(M) if case.weights is None else np.array(case.weights)
    aw = w if case.scope == "all" else np.ones(M)  # weights on every term
    sw = w * (np.ones(M) if case.lag is None else np.array(case.lag))  # weights on the surrogate
    adv = ADV
    if case.norm_adv:  # statistics under aw (core.algo.losses.normalised_advantages); equal weights here
        adv = (ADV - ADV.mean()) / (ADV.std(ddof=1) + 1e-8)
    clipped_r = np.clip(RATIOS, 1 - eps_low, 1 + eps_high)
    surrogate = np.minimum(RATIOS * adv, clipped_r * adv)
    g_logp = -(sw / M) * adv * RATIOS * (RATIOS * adv <= clipped_r * adv)
    g_ent = -ENT_COEF * aw / M  # dL/dH_i
    if case.discrete:
        log_p = np.log(P_CAT)
        entropy = np.full(M, H_CAT)
        g_logits = (g_logp[:, None] * (np.eye(3)[ACTIONS_CAT] - P_CAT)
                    + g_ent[:, None] * (-P_CAT * (log_p + H_CAT)))  # (M, 3)
        grads_actor = {"net.0.weight": (g_logits * X[:, None]).sum(0)[:, None], "net.0.bias": g_logits.sum(0)}
    else:
        entropy = np.full(M, H_GAUSS)
        g_mu = g_logp * Z_GAUSS  # std = 1
        grads_actor = {"net.0.weight": np.array([[np.sum(g_mu * X)]]), "net.0.bias": np.array([g_mu.sum()]),
                       "log_std": np.array([np.sum(g_logp * (Z_GAUSS ** 2 - 1)) + g_ent.sum()])}
    v = W_CRITIC * X
    err = (v - RETURNS) ** 2
    if eps_v is None:
        per_sample, g_v, v_clip_frac = err, 2 * (v - RETURNS), 0.0
    else:
        inside = np.abs(v - V_OLD) <= eps_v
        v_clip = V_OLD + np.clip(v - V_OLD, -eps_v, eps_v)
        err_clip = (v_clip - RETURNS) ** 2
        per_sample = np.maximum(err, err_clip)
        g_unclipped, g_clipped = 2 * (v - RETURNS), 2 * (v_clip - RETURNS) * inside
        g_v = np.where(err > err_clip, g_unclipped, np.where(err < err_clip, g_clipped, (g_unclipped + g_clipped) / 2))
        v_clip_frac = float(np.mean(~inside))
    g_v = VF_COEF * aw / M * g_v
    grads_critic = {"net.0.weight": np.array([[np.sum(g_v * X)]]), "net.0.bias": np.array([g_v.sum()])}
    norm_a = math.sqrt(sum(float((g ** 2).sum()) for g in grads_actor.values()))
    norm_c = math.sqrt(sum(float((g ** 2).sum()) for g in grads_critic.values()))
    scale = lambda norm: min(1.0, case.max_grad_norm / (norm + 1e-6))  # noqa: E731  torch's clip_grad_norm_ rule
    s_a, s_c = (scale(norm_a), scale(norm_c)) if case.separate else (scale(math.hypot(norm_a, norm_c)),) * 2
    step = lambda g, lr, s: -lr * g * s / (np.abs(g * s) + ADAM_EPS)  # noqa: E731
    deltas = {**{f"actor.{k}": step(g, LR_ACTOR, s_a) for k, g in grads_actor.items()},
              **{f"critic.{k}": step(g, LR_CRITIC, s_c) for k, g in grads_critic.items()}}
    pi, vl, h = -np.mean(sw * surrogate), np.mean(aw * per_sample), np.mean(aw * entropy)
    metrics = {"policy_loss": pi, "value_loss": vl, "entropy": h, "loss": pi + VF_COEF * vl - ENT_COEF * h,
               "clip_fraction": float(np.mean((RATIOS < 1 - eps_low) | (RATIOS > 1 + eps_high))),
               "value_clip_fraction": v_clip_frac, "grad_norm_actor": norm_a, "grad_norm_critic": norm_c,
               "grad_scale_actor": s_a}
    return metrics, deltas


def run(case: Case, backend: str) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """One update with ``backend``: its metrics (without ``train/``) and every parameter's change, by name."""
    actor, critic, opt, sampler, proximal = build(case)
    named = {**{f"actor.{k}": p for k, p in actor.named_parameters()},
             **{f"critic.{k}": p for k, p in critic.named_parameters()}}
    before = {k: p.detach().clone() for k, p in named.items()}
    metrics, finite = BACKENDS[backend](actor, critic, opt, case.separate).update(sampler, case.eps, settings(case),
                                                                                  proximal)
    assert finite
    return ({k.removeprefix("train/"): v for k, v in metrics.items()},
            {k: (p.detach() - before[k]).double() for k, p in named.items()})


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("name", list(CASES))
def test_one_step_meets_the_hand_worked_case(name, backend):
    case = CASES[name]
    metrics, deltas = run(case, backend)
    expected_metrics, expected_deltas = closed_form(case)
    for k, v in case.hand.items():  # the literals worked by hand agree with the closed form and with the backend
        assert expected_metrics[k] == pytest.approx(v, abs=1e-7), k  # 1e-7: the 1e-8 in the advantage std
        assert metrics[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
    for k, v in expected_metrics.items():
        assert metrics[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
    assert set(deltas) == set(expected_deltas)
    for k, d in deltas.items():
        torch.testing.assert_close(d, torch.from_numpy(expected_deltas[k]), rtol=1e-4, atol=1e-7, msg=k)
    if case.max_grad_norm < 1:  # the clipping cases do clip
        assert metrics["grad_scale_actor"] < 1


def test_the_table_exercises_both_clip_modes_differently():
    """Joint and separate clipping give different steps on the same minibatch (else those rows test nothing)."""
    joint, separate = closed_form(CASES["gaussian-joint-grad-clip"]), closed_form(CASES["gaussian-separate-grad-clip"])
    assert joint[1]["critic.net.0.bias"] != pytest.approx(separate[1]["critic.net.0.bias"], rel=0.5)
    assert all(np.abs(d).max() > 0 for d in joint[1].values())  # every parameter moves


@pytest.mark.parametrize("name", list(CASES))
def test_the_backends_agree_to_float_precision(name):
    (m_t, d_t), (m_n, d_n) = run(CASES[name], "torch"), run(CASES[name], "numpy")
    assert list(m_t) == list(m_n)
    for k in m_t:
        assert m_n[k] == pytest.approx(m_t[k], rel=2e-6, abs=1e-7), k
    for k in d_t:
        torch.testing.assert_close(d_n[k], d_t[k], rtol=2e-6, atol=2e-8, msg=k)
