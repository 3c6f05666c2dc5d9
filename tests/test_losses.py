"""Hand-computed checks of the PPO-family losses in ``core.algo.losses`` (docs/algorithms.md sections 2-4.2).

Every expected number is a literal worked out by hand in the comment next to it; none is obtained
by re-implementing the formula under test.  The standard toy uses ``logp_old = 0`` and
``logp_new = log(r)`` so that the ratios are exactly ``r = 0.5, 1.0, 1.25, 1.5``.
"""
import math

import pytest
import torch

from core.algo.losses import combined_objective, entropy_bonus, policy_loss, value_loss
from core.algo.advantages import explained_variance

RATIOS = [0.5, 1.0, 1.25, 1.5]


def _logps(ratios=RATIOS, requires_grad=False):
    """``(logp_new, logp_old)`` with ``exp(logp_new - logp_old) == ratios`` exactly (float64)."""
    logp_new = torch.tensor([math.log(r) for r in ratios], dtype=torch.float64, requires_grad=requires_grad)
    logp_old = torch.zeros(len(ratios), dtype=torch.float64)
    return logp_new, logp_old


def _adv(value, n=len(RATIOS)):
    return torch.full((n,), float(value), dtype=torch.float64)


# --------------------------------------------------------------------------------------------
# Policy loss: symmetric clip
# --------------------------------------------------------------------------------------------

def test_symmetric_clip_positive_advantage():
    """A = +1, eps = 0.2 (clip range [0.8, 1.2]); min(r*A, clip(r)*A) per ratio:
    r=0.5 -> min(0.5, 0.8) = 0.5;  r=1 -> 1;  r=1.25 -> min(1.25, 1.2) = 1.2;  r=1.5 -> min(1.5, 1.2) = 1.2.
    Mean = (0.5 + 1 + 1.2 + 1.2) / 4 = 3.9 / 4 = 0.975, loss = -0.975."""
    logp_new, logp_old = _logps()
    loss, _ = policy_loss(logp_new, logp_old, _adv(1.0), eps_low=0.2, eps_high=0.2)
    assert loss.item() == pytest.approx(-0.975, abs=1e-12)


def test_symmetric_clip_negative_advantage():
    """A = -1, eps = 0.2; min(r*A, clip(r)*A):
    r=0.5 -> min(-0.5, -0.8) = -0.8;  r=1 -> -1;  r=1.25 -> min(-1.25, -1.2) = -1.25;
    r=1.5 -> min(-1.5, -1.2) = -1.5.   Mean = -4.55 / 4 = -1.1375, loss = +1.1375."""
    logp_new, logp_old = _logps()
    loss, _ = policy_loss(logp_new, logp_old, _adv(-1.0), eps_low=0.2, eps_high=0.2)
    assert loss.item() == pytest.approx(1.1375, abs=1e-12)


def test_mixed_sign_advantage_three_ratios():
    """Ratios (0.5, 1.0, 1.5), A = (+2, -1, -2), eps = 0.2:
    r=0.5,A=+2 -> min(1.0, 1.6) = 1.0;  r=1,A=-1 -> -1;  r=1.5,A=-2 -> min(-3.0, -2.4) = -3.0.
    Mean = (1 - 1 - 3) / 3 = -1, loss = +1."""
    logp_new, logp_old = _logps([0.5, 1.0, 1.5])
    adv = torch.tensor([2.0, -1.0, -2.0], dtype=torch.float64)
    loss, _ = policy_loss(logp_new, logp_old, adv, 0.2, 0.2)
    assert loss.item() == pytest.approx(1.0, abs=1e-12)


def test_clipped_terms_have_zero_gradient():
    """A = +1, eps = 0.2: unclipped terms r*A have d/dlogp = r, clipped terms are constant.
    d loss / d logp_new = -(1/4) * (0.5, 1.0, 0, 0) = (-0.125, -0.25, 0, 0)."""
    logp_new, logp_old = _logps(requires_grad=True)
    loss, _ = policy_loss(logp_new, logp_old, _adv(1.0), 0.2, 0.2)
    loss.backward()
    torch.testing.assert_close(logp_new.grad, torch.tensor([-0.125, -0.25, 0.0, 0.0], dtype=torch.float64))


# --------------------------------------------------------------------------------------------
# Policy loss: asymmetric clip-higher (eps_low = 0.2, eps_high = 0.28 -> range [0.8, 1.28])
# --------------------------------------------------------------------------------------------

def test_clip_higher_positive_advantage_differs_from_symmetric():
    """A = +1, range [0.8, 1.28]:
    r=0.5 -> 0.5;  r=1 -> 1;  r=1.25 -> min(1.25, 1.25) = 1.25 (no longer clipped);
    r=1.5 -> min(1.5, 1.28) = 1.28.   Mean = 4.03 / 4 = 1.0075, loss = -1.0075
    (symmetric eps=0.2 gives -0.975, see above)."""
    logp_new, logp_old = _logps()
    loss, diag = policy_loss(logp_new, logp_old, _adv(1.0), eps_low=0.2, eps_high=0.28)
    assert loss.item() == pytest.approx(-1.0075, abs=1e-12)
    sym, _ = policy_loss(logp_new, logp_old, _adv(1.0), eps_low=0.2, eps_high=0.2)
    assert loss.item() != pytest.approx(sym.item(), abs=1e-6)


def test_clip_higher_negative_advantage():
    """A = -1, range [0.8, 1.28]: for A < 0 the pessimistic min never uses the upper clip, the lower
    one still binds: r=0.5 -> min(-0.5, -0.8) = -0.8;  r=1 -> -1;  r=1.25 -> -1.25;  r=1.5 -> min(-1.5, -1.28) = -1.5.
    Mean = -4.55 / 4 = -1.1375, loss = 1.1375 (same as symmetric)."""
    logp_new, logp_old = _logps()
    loss, _ = policy_loss(logp_new, logp_old, _adv(-1.0), eps_low=0.2, eps_high=0.28)
    assert loss.item() == pytest.approx(1.1375, abs=1e-12)


def test_clip_low_is_used_for_negative_advantage():
    """eps_low = 0.4, eps_high = 0.2 (range [0.6, 1.2]), r = 0.5, A = -1:
    min(-0.5, -0.6) = -0.6 -> loss 0.6 (with eps_low = 0.2 it would be 0.8): eps_low is the lower bound."""
    logp_new, logp_old = _logps([0.5])
    loss, _ = policy_loss(logp_new, logp_old, _adv(-1.0, 1), eps_low=0.4, eps_high=0.2)
    assert loss.item() == pytest.approx(0.6, abs=1e-12)


# --------------------------------------------------------------------------------------------
# Diagnostics
# --------------------------------------------------------------------------------------------

def test_clip_fraction_symmetric_and_clip_higher():
    """Ratios (0.5, 1, 1.25, 1.5). Range [0.8, 1.2]: 0.5, 1.25, 1.5 outside -> 3/4 = 0.75.
    Range [0.8, 1.28]: 0.5, 1.5 outside -> 2/4 = 0.5."""
    logp_new, logp_old = _logps()
    _, d_sym = policy_loss(logp_new, logp_old, _adv(1.0), 0.2, 0.2)
    _, d_hi = policy_loss(logp_new, logp_old, _adv(1.0), 0.2, 0.28)
    assert d_sym["clip_fraction"].item() == pytest.approx(0.75)
    assert d_hi["clip_fraction"].item() == pytest.approx(0.5)


def test_approx_kl_k3_estimator_and_ratio_stats():
    """k3 = mean((r - 1) - log r):
    r=0.5  -> -0.5  + 0.693147 = 0.193147
    r=1    ->  0
    r=1.25 ->  0.25 - 0.223144 = 0.026856
    r=1.5  ->  0.5  - 0.405465 = 0.094535
    sum = 0.314538, mean = 0.0786346.   ratio_mean = 4.25 / 4 = 1.0625, min 0.5, max 1.5."""
    logp_new, logp_old = _logps()
    _, d = policy_loss(logp_new, logp_old, _adv(1.0), 0.2, 0.2)
    assert d["approx_kl"].item() == pytest.approx(0.0786346, abs=1e-6)
    assert d["ratio_mean"].item() == pytest.approx(1.0625)
    assert d["ratio_min"].item() == pytest.approx(0.5)
    assert d["ratio_max"].item() == pytest.approx(1.5)


def test_approx_kl_zero_when_policies_equal():
    """r = 1 everywhere: k3 = 0, nothing clipped, loss = -mean(A) = -(1 + 2 - 3 + 4)/4 = -1."""
    logp = torch.tensor([-1.0, -2.0, -0.5, -3.0], dtype=torch.float64)
    adv = torch.tensor([1.0, 2.0, -3.0, 4.0], dtype=torch.float64)
    loss, d = policy_loss(logp, logp.clone(), adv, 0.2, 0.2)
    assert loss.item() == pytest.approx(-1.0)
    assert d["approx_kl"].item() == pytest.approx(0.0, abs=1e-12)
    assert d["clip_fraction"].item() == 0.0


# --------------------------------------------------------------------------------------------
# Importance weights
# --------------------------------------------------------------------------------------------

def test_policy_loss_weights_are_a_plain_weighted_mean():
    """A = +1, eps = 0.2, surrogate terms (0.5, 1, 1.2, 1.2), weights (2, 0, 1, 1):
    loss = -(2*0.5 + 0*1 + 1*1.2 + 1*1.2) / 4 = -(1 + 2.4) / 4 = -0.85  (mean over M, not self-normalised)."""
    logp_new, logp_old = _logps()
    w = torch.tensor([2.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    loss, _ = policy_loss(logp_new, logp_old, _adv(1.0), 0.2, 0.2, weights=w)
    assert loss.item() == pytest.approx(-0.85, abs=1e-12)


def test_unit_weights_change_nothing():
    logp_new, logp_old = _logps()
    adv = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)
    plain, _ = policy_loss(logp_new, logp_old, adv, 0.2, 0.28)
    ones, _ = policy_loss(logp_new, logp_old, adv, 0.2, 0.28, weights=torch.ones(4, dtype=torch.float64))
    assert ones.item() == pytest.approx(plain.item(), abs=1e-12)


def test_value_loss_and_entropy_weights():
    """Unclipped value errors (1, 4, 4) with weights (3, 0, 0.5): (3 + 0 + 2) / 3 = 5/3.
    Entropy (1, 2, 3) with weights (3, 0, 0.5): (3 + 0 + 1.5) / 3 = 1.5."""
    v = torch.tensor([1.0, 2.0, 3.0])
    r = torch.tensor([0.0, 0.0, 5.0])
    w = torch.tensor([3.0, 0.0, 0.5])
    loss, _ = value_loss(v, torch.zeros(3), r, None, weights=w)
    assert loss.item() == pytest.approx(5.0 / 3.0, abs=1e-6)
    assert entropy_bonus(torch.tensor([1.0, 2.0, 3.0]), w).item() == pytest.approx(1.5, abs=1e-6)
    assert entropy_bonus(torch.tensor([1.0, 2.0, 3.0])).item() == pytest.approx(2.0, abs=1e-6)


# --------------------------------------------------------------------------------------------
# Value loss
# --------------------------------------------------------------------------------------------

def test_value_loss_unclipped_ignores_v_old():
    """eps=None: mean((V - R)^2) with V = (1, 2, 3), R = (0, 0, 5): (1 + 4 + 4) / 3 = 3.
    V_old is irrelevant (set to absurd values)."""
    v = torch.tensor([1.0, 2.0, 3.0])
    r = torch.tensor([0.0, 0.0, 5.0])
    loss, d = value_loss(v, torch.tensor([100.0, -100.0, 7.0]), r, None)
    assert loss.item() == pytest.approx(3.0)
    assert d["value_clip_fraction"].item() == 0.0


def test_value_loss_clips_the_prediction_around_v_old():
    """V_old = 0, eps = 0.2, V_clip = clip(V, -0.2, 0.2); per sample max((V-R)^2, (V_clip-R)^2):
      V=0.1,  R=1  : inside the clip, (0.9)^2 = 0.81
      V=0.5,  R=1  : V_clip=0.2: max(0.25, 0.64) = 0.64   (moved towards R beyond the clip)
      V=0.5,  R=0  : V_clip=0.2: max(0.25, 0.04) = 0.25   (moved away from R: unclipped error)
      V=-0.5, R=-3 : V_clip=-0.2: max(6.25, 7.84) = 7.84
    mean = (0.81 + 0.64 + 0.25 + 7.84) / 4 = 9.54 / 4 = 2.385.
    The buggy snippet that clamps the loss *value* to [1-eps, 1+eps] = [0.8, 1.2] would give
    per-sample (0.81, 0.8, 0.8, 1.2) -> 0.9025, or, clamping the mean unclipped error
    (0.81 + 0.25 + 0.25 + 6.25) / 4 = 1.89, 1.2: both differ."""
    v_new = torch.tensor([0.1, 0.5, 0.5, -0.5], dtype=torch.float64)
    v_old = torch.zeros(4, dtype=torch.float64)
    r = torch.tensor([1.0, 1.0, 0.0, -3.0], dtype=torch.float64)
    loss, d = value_loss(v_new, v_old, r, eps=0.2)
    assert loss.item() == pytest.approx(2.385, abs=1e-12)
    assert loss.item() != pytest.approx(0.9025, abs=1e-3)
    assert loss.item() != pytest.approx(1.2, abs=1e-3)
    # |V - V_old| > 0.2 for the last three samples
    assert d["value_clip_fraction"].item() == pytest.approx(0.75)


def test_value_clip_single_sample_not_a_loss_clamp():
    """V_old = 0, eps = 0.2, V = 0.5, R = 1: V_clip = 0.2 -> max(0.25, 0.64) = 0.64.
    Clamping either squared error to [0.8, 1.2] would give 0.8."""
    loss, _ = value_loss(torch.tensor([0.5]), torch.tensor([0.0]), torch.tensor([1.0]), eps=0.2)
    assert loss.item() == pytest.approx(0.64, abs=1e-6)


def test_value_clip_is_relative_to_v_old():
    """V_old = 10, eps = 0.5, V = 12, R = 13: V_clip = 10.5 -> max(1, 6.25) = 6.25
    (clipping around 0 instead of V_old would give V_clip = 0.5 -> 156.25)."""
    loss, _ = value_loss(torch.tensor([12.0]), torch.tensor([10.0]), torch.tensor([13.0]), eps=0.5)
    assert loss.item() == pytest.approx(6.25, abs=1e-6)


def test_value_clip_gradient():
    """Same four samples as above. Gradient of the mean wrt V (per sample / 4):
    V=0.1 (unclipped, 2*(0.1-1) = -1.8) -> -0.45;  V=0.5,R=1 (clipped term wins, constant) -> 0;
    V=0.5,R=0 (2*0.5 = 1) -> 0.25;  V=-0.5,R=-3 (clipped term wins) -> 0."""
    v_new = torch.tensor([0.1, 0.5, 0.5, -0.5], dtype=torch.float64, requires_grad=True)
    r = torch.tensor([1.0, 1.0, 0.0, -3.0], dtype=torch.float64)
    loss, _ = value_loss(v_new, torch.zeros(4, dtype=torch.float64), r, eps=0.2)
    loss.backward()
    torch.testing.assert_close(v_new.grad, torch.tensor([-0.45, 0.0, 0.25, 0.0], dtype=torch.float64))


def test_value_loss_reports_explained_variance_of_v_new():
    """V = (1, 2, 3), R = (0, 2, 4): Var(R) = 8/3, residual (-1, 0, 1) has Var 2/3 -> EV = 1 - 1/4 = 0.75."""
    _, d = value_loss(torch.tensor([1.0, 2.0, 3.0]), torch.zeros(3), torch.tensor([0.0, 2.0, 4.0]), eps=None)
    assert d["explained_variance"].item() == pytest.approx(0.75, abs=1e-6)


# --------------------------------------------------------------------------------------------
# Explained variance and combined objective
# --------------------------------------------------------------------------------------------

def test_explained_variance_hand_values():
    """pred = target -> 1;  pred = mean(target) -> 0;
    target (0, 2, 4), pred (1, 2, 3): 1 - (2/3)/(8/3) = 0.75;
    target (0, 2), pred (2, 0): residual (-2, 2), Var 4 vs Var(target) 1 -> 1 - 4 = -3."""
    t = torch.tensor([0.0, 2.0, 4.0])
    assert explained_variance(t.clone(), t).item() == pytest.approx(1.0)
    assert explained_variance(torch.full((3,), 2.0), t).item() == pytest.approx(0.0, abs=1e-7)
    assert explained_variance(torch.tensor([1.0, 2.0, 3.0]), t).item() == pytest.approx(0.75)
    assert explained_variance(torch.tensor([2.0, 0.0]), torch.tensor([0.0, 2.0])).item() == pytest.approx(-3.0)


def test_explained_variance_constant_target_is_nan():
    ev = explained_variance(torch.tensor([1.0, 2.0, 3.0]), torch.full((3,), 5.0))
    assert math.isnan(ev.item())


def test_combined_objective():
    """L = L_pi + c_V*L_V - c_H*H = 1.0 + 0.25*2.0 - 0.1*0.5 = 1.0 + 0.5 - 0.05 = 1.45;
    gradients: dL/dL_pi = 1, dL/dL_V = 0.25, dL/dH = -0.1."""
    pi = torch.tensor(1.0, requires_grad=True)
    v = torch.tensor(2.0, requires_grad=True)
    h = torch.tensor(0.5, requires_grad=True)
    loss = combined_objective(pi, v, h, vf_coef=0.25, ent_coef=0.1)
    assert loss.item() == pytest.approx(1.45, abs=1e-6)
    loss.backward()
    assert (pi.grad.item(), v.grad.item(), h.grad.item()) == pytest.approx((1.0, 0.25, -0.1))
