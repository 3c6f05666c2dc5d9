"""The expected policy gradient of ``ppo_update`` under its default per-minibatch advantage normalisation.

Importance weights ``1/(N p_i)`` make the minibatch gradient of the *raw* losses unbiased for uniform sampling
(``tests/test_sampler.py``), and ``--resampling weighted`` (a permutation, losses weighted by ``N p_i``)
reproduces the draws' expected gradient.  With ``norm_adv`` each minibatch's advantages are standardised
first; the statistics must then be taken under the same weights, or the draws' skew towards large ``|A|``
leaks into them (issue 46: -37% and +56% before the fix).

Set-up (issue 46's numbers): ``N = 256`` Gaussian advantages, ``T = 0.3``, minibatch 64, a one-parameter
"policy" ``logp_i = theta * A_i`` at ``theta = 0`` (ratio 1, inside the clip), so each minibatch's policy
gradient is the scalar ``-mean_j(w_j * Anorm_j * A_j)``: how far the step moves the log-probs along the
advantages.  Its expectation is estimated from 4000 minibatches per sampler, fixed seeds.

Measured (this seed): uniform 0.923, draws + importance weights 0.601 before the fix and 0.921 after; draws
1.424, ``weighted`` 2.172 before and 1.370 after.  The tolerance is 5% + 4 standard errors: weighted
statistics are ratio estimators, biased by O(1/effective minibatch size); ``weighted``'s weights ``N p_i``
(ESS 0.53 here) leave ~34 effective samples of 64, and a -4% gap to the draws (whose own statistics are
-2% off the population value ``sd_p = 1.447``).  The bug's -35% / +53% is far outside it.
"""
import math

import torch

from core.algo.sampler import DynamicSampler, Temperature, Transitions
from core.algo.losses import normalised_advantages
from core.training.update import Evaluation, GradGroups, UpdateSettings, ppo_update

N, T, M, K = 256, 0.3, 64, 4000  # window, temperature, minibatch size, minibatches per estimate


class _Recorder(torch.optim.Optimizer):
    """Records each step's gradient ``(1,)`` and leaves theta at 0, so every minibatch sees the same policy."""

    def __init__(self, params):
        super().__init__(params, {})
        self.grads: list[float] = []

    def step(self, closure=None):
        self.grads.append(float(self.param_groups[0]["params"][0].grad))


def _expected_gradient(adv: torch.Tensor, seed: int, **sampler_kwargs) -> tuple[float, float]:
    """Mean and standard error of the policy gradient over ``K`` minibatches of ``M`` from a sampler on ``adv`` ``(N,)``."""
    zeros = torch.zeros(N)
    sampler = DynamicSampler(N, torch.device("cpu"), Temperature("fixed", T), seed=seed, **sampler_kwargs)
    sampler.add(Transitions(obs=adv[:, None], actions=zeros, logp_old=zeros, values_old=zeros, advantages=adv,
                            returns=zeros))
    theta = torch.zeros(1, requires_grad=True)
    opt = _Recorder([theta])

    def evaluate(mb):
        return Evaluation(logp=theta * mb.obs[:, 0], entropy=torch.zeros(len(mb.obs)), values=torch.zeros(len(mb.obs)))

    settings = UpdateSettings(num_epochs=1, num_minibatches=K, minibatch_size=M, norm_adv=True, vf_coef=0.0,
                              ent_coef=0.0, max_grad_norm=1e9)
    _, ok = ppo_update(sampler, evaluate, opt, GradGroups([theta], [], joint=False), lambda mb: (0.2, 0.2, None),
                       settings)
    assert ok and len(opt.grads) == K
    g = -torch.tensor(opt.grads, dtype=torch.float64)  # ascent direction: positive = towards the advantages
    return float(g.mean()), float(g.std()) / math.sqrt(K)


def _advantages(seed: int = 0) -> torch.Tensor:
    return torch.randn(N, generator=torch.Generator().manual_seed(seed))


def test_importance_weighted_draws_match_uniform_minibatches_under_normalisation():
    """Draws from p with weights 1/(N p_i) have the expected gradient of PPO's uniform minibatches (within
    5% + 4 standard errors); plain standardisation of the skewed draws gave 0.65 of it."""
    adv = _advantages()
    uniform, se_u = _expected_gradient(adv, seed=1, dynamic=False)
    corrected, se_c = _expected_gradient(adv, seed=2, importance_correction=True)
    print(f"uniform {uniform:.3f} +- {se_u:.3f}, draws + importance weights {corrected:.3f} +- {se_c:.3f}")
    assert abs(corrected - uniform) < 0.05 * uniform + 4 * math.hypot(se_u, se_c)


def test_weighted_resampling_matches_the_draws_under_normalisation():
    """``weighted`` (permutation, weights N p_i) has the expected gradient of the unweighted draws from p that
    it stands for (within 5% + 4 standard errors); plain standardisation of the permutation gave 1.53x it."""
    adv = _advantages()
    draws, se_d = _expected_gradient(adv, seed=3)
    weighted, se_w = _expected_gradient(adv, seed=4, resampling="weighted")
    print(f"draws {draws:.3f} +- {se_d:.3f}, weighted {weighted:.3f} +- {se_w:.3f}")
    assert abs(weighted - draws) < 0.05 * draws + 4 * math.hypot(se_d, se_w)


def test_normalised_advantages_hand_numbers():
    """A = (0, 1, 3), w = (1, 1, 2): mu = 7/4; sum w (A - mu)^2 = 3.0625 + 0.5625 + 2 * 1.5625 = 6.75;
    V1 = 4, V2 = 6, so var = 6.75 / (4 - 6/4) = 2.7.  Equal weights (any scale) give the plain mean and ddof=1
    std; no weights is the plain case."""
    adv = torch.tensor([0.0, 1.0, 3.0], dtype=torch.float64)
    got = normalised_advantages(adv, torch.tensor([1.0, 1.0, 2.0], dtype=torch.float64), eps=0.0)
    torch.testing.assert_close(got, (adv - 1.75) / math.sqrt(2.7))
    plain = (adv - 4 / 3) / math.sqrt(((adv - 4 / 3) ** 2).sum() / 2)
    torch.testing.assert_close(normalised_advantages(adv, eps=0.0), plain)
    torch.testing.assert_close(normalised_advantages(adv, torch.full((3,), 0.3, dtype=torch.float64), eps=0.0), plain)
