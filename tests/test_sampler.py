"""DAPO's dynamic sampler (``core.algo.sampler``, docs/algorithms.md section 4.2).

Checked here: the sampling distribution ``p = softmax((|A|/max|A|)/T)`` and ESS on hand numbers;
that ``DynamicSampler.minibatches`` really draws from ``p`` (chi-square and 5-sigma binomial bounds,
fixed seed) and that ``dynamic=False`` yields permutations; the four temperature rules; the
importance weights ``1/(N p_i)`` and the unbiasedness of the weighted gradient (exactly and by
Monte Carlo); the sliding window; and the state round trip through ``torch.save``.
"""
import io
import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from core.algo.sampler import DynamicSampler, Temperature, Transitions, effective_sample_size, sampling_probs

CPU = torch.device("cpu")


def _transitions(ids, adv=None):
    """Transitions whose every field encodes the transition's id, so rows can be identified:
    obs = (id, -id), action = id, logp_old = -id/10, V_old = 100 + id, A = adv or id + 1, R = 1000 + id."""
    ids = torch.as_tensor(ids, dtype=torch.float32)
    adv = ids + 1.0 if adv is None else torch.as_tensor(adv, dtype=torch.float32)
    return Transitions(obs=torch.stack([ids, -ids], dim=1), actions=ids.clone(), logp_old=-ids / 10,
                       values_old=100 + ids, advantages=adv, returns=1000 + ids)


def _sampler(adv, temperature=None, dynamic=True, importance_correction=False, seed=0, capacity=None,
             resampling="multinomial"):
    s = DynamicSampler(capacity or len(adv), CPU, temperature, dynamic, importance_correction, seed, resampling)
    s.add(_transitions(range(len(adv)), adv))
    return s


# --------------------------------------------------------------------------------------------
# Distribution and ESS
# --------------------------------------------------------------------------------------------

def test_sampling_probs_hand_case():
    """A = (0, 1, -2, 2), T = 1: w = |A|/2 = (0, .5, 1, 1);
    softmax: (1, e^.5, e, e) / (1 + 1.648721 + 2*2.718282 = 8.085285)
           = (0.123681, 0.203916, 0.336201, 0.336201).
    T = 0.5: w/T = (0, 1, 2, 2): (1, 2.718282, 7.389056, 7.389056) / 18.496394
           = (0.054065, 0.146963, 0.399486, 0.399486)."""
    adv = torch.tensor([0.0, 1.0, -2.0, 2.0])
    torch.testing.assert_close(sampling_probs(adv, 1.0), torch.tensor([0.123681, 0.203916, 0.336201, 0.336201]),
                               atol=2e-6, rtol=0)
    torch.testing.assert_close(sampling_probs(adv, 0.5), torch.tensor([0.054065, 0.146963, 0.399486, 0.399486]),
                               atol=2e-6, rtol=0)


def test_sampling_probs_limits():
    """All-zero advantages -> uniform; huge T -> uniform; tiny T -> all mass on the largest |A|."""
    torch.testing.assert_close(sampling_probs(torch.zeros(5), 1.0), torch.full((5,), 0.2))
    torch.testing.assert_close(sampling_probs(torch.tensor([0.0, 1.0, -2.0, 2.0]), 1e6), torch.full((4,), 0.25),
                               atol=1e-6, rtol=0)
    torch.testing.assert_close(sampling_probs(torch.tensor([0.1, -3.0, 1.0]), 1e-3), torch.tensor([0.0, 1.0, 0.0]))


def test_effective_sample_size():
    """uniform -> 1;  one-hot over N=4 -> 1/4;  (.5, .5, 0, 0): 1/(4*0.5) = 0.5;
    hand p of A=(0,1,-2,2), T=1: sum p^2 = 0.015297 + 0.041582 + 2*0.113031 = 0.282942 -> 1/(4*0.282942) = 0.883575."""
    assert effective_sample_size(torch.full((10,), 0.1)).item() == pytest.approx(1.0)
    assert effective_sample_size(torch.tensor([0.0, 1.0, 0.0, 0.0])).item() == pytest.approx(0.25)
    assert effective_sample_size(torch.tensor([0.5, 0.5, 0.0, 0.0])).item() == pytest.approx(0.5)
    p = sampling_probs(torch.tensor([0.0, 1.0, -2.0, 2.0]), 1.0)
    assert effective_sample_size(p).item() == pytest.approx(0.883575, abs=1e-5)


def test_sampler_probabilities_and_stats():
    """The sampler's p over its window is the hand p above; stats: ESS 0.883575, max N*p = 4*0.336201 = 1.344804.
    With dynamic=False, p is uniform: ESS 1, max weight 1."""
    s = _sampler([0.0, 1.0, -2.0, 2.0], Temperature("fixed", 1.0))
    torch.testing.assert_close(s.probabilities(), torch.tensor([0.123681, 0.203916, 0.336201, 0.336201]),
                               atol=2e-6, rtol=0)
    st = s.stats()
    assert st["sampler/temperature"] == pytest.approx(1.0)
    assert st["sampler/ess"] == pytest.approx(0.883575, abs=1e-5)
    assert st["sampler/max_weight"] == pytest.approx(1.344804, abs=1e-5)
    u = _sampler([0.0, 1.0, -2.0, 2.0], dynamic=False).stats()
    assert u["sampler/ess"] == pytest.approx(1.0) and u["sampler/max_weight"] == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------
# Minibatch draws
# --------------------------------------------------------------------------------------------

ADV8 = [0.0, 0.5, -1.0, 1.0, 2.0, -3.0, 4.0, 0.25]


def test_dynamic_draw_frequencies_match_p():
    """20 000 draws (fixed seed) from an 8-transition window at T = 0.5: chi-square goodness of fit
    and, per index, |freq - p| <= 5 * sqrt(p (1 - p) / n).  The same counts must reject uniform p."""
    s = _sampler(ADV8, Temperature("fixed", 0.5), seed=123)
    p = s.probabilities().double().numpy()
    assert abs(p.sum() - 1) < 1e-6
    p = p / p.sum()                                   # float32 -> exact sum for scipy's check
    assert p.max() / p.min() > 5                      # a genuinely non-uniform target
    idx = torch.cat([i for i, w in s.minibatches(num_minibatches=20, minibatch_size=1000)])
    assert idx.shape == (20_000,)
    n = idx.numel()
    counts = np.bincount(idx.numpy(), minlength=8)
    assert chisquare(counts, n * p).pvalue > 1e-3
    freq = counts / n
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n))
    assert chisquare(counts, np.full(8, n / 8)).pvalue < 1e-10


def test_dynamic_draws_only_filled_slots():
    """A window holding 3 of 10 slots samples only indices 0..2 (the empty slots hold zeros)."""
    s = DynamicSampler(10, CPU, Temperature("fixed", 1.0), dynamic=True, seed=1)
    s.add(_transitions([0, 1, 2], [1.0, -2.0, 0.5]))
    idx = torch.cat([i for i, _ in s.minibatches(10, 50)])
    assert idx.min() >= 0 and idx.max() <= 2
    assert set(idx.tolist()) == {0, 1, 2}


def test_uniform_mode_is_a_permutation_each_epoch():
    """dynamic=False, 12 transitions, 3 minibatches of 4: every index exactly once per epoch,
    weights None; epochs are reshuffled."""
    s = _sampler(ADV8 + [5.0, 6.0, 7.0, 8.0], dynamic=False, seed=7)
    orders = []
    for _ in range(5):
        batches = list(s.minibatches(3, 4))
        assert len(batches) == 3
        assert all(w is None and i.shape == (4,) for i, w in batches)
        epoch = torch.cat([i for i, _ in batches])
        assert sorted(epoch.tolist()) == list(range(12))
        orders.append(tuple(epoch.tolist()))
    assert len(set(orders)) > 1


def test_uniform_mode_partial_window():
    """capacity 20 holding 12: a permutation of 0..11 (never an empty slot)."""
    s = DynamicSampler(20, CPU, dynamic=False, seed=3)
    s.add(_transitions(range(12)))
    epoch = torch.cat([i for i, _ in s.minibatches(4, 3)])
    assert sorted(epoch.tolist()) == list(range(12))


# --------------------------------------------------------------------------------------------
# Temperature rules
# --------------------------------------------------------------------------------------------

def test_temperature_fixed_never_changes():
    t = Temperature("fixed", init=0.7)
    for _ in range(5):
        t.on_rollout(torch.tensor([0.0, -3.0, 0.0, 3.0]))
        t.on_update()
    assert t.value == pytest.approx(0.7, abs=1e-6)


def test_temperature_decay_and_floor():
    """decay 0.99 from 1.0: three updates -> 0.99^3 = 0.970299 (rollouts do not decay it).
    decay 0.5, floor 0.3: 0.5, then 0.25 -> floored 0.3, stays 0.3."""
    t = Temperature("decay", init=1.0, decay=0.99)
    t.on_rollout(torch.tensor([0.0, 1.0]))
    assert t.value == pytest.approx(1.0, abs=1e-6)
    for _ in range(3):
        t.on_update()
    assert t.value == pytest.approx(0.970299, abs=1e-6)

    f = Temperature("decay", init=1.0, decay=0.5, minimum=0.3)
    f.on_update()
    assert f.value == pytest.approx(0.5, abs=1e-6)
    f.on_update()
    assert f.value == pytest.approx(0.3, abs=1e-6)
    f.on_update()
    assert f.value == pytest.approx(0.3, abs=1e-6)


def test_temperature_ema_hand_numbers():
    """A = (0, -3, 0, 3): w = (0, 1, 0, 1), std(w) = 0.5 (population std).
    T: 1.0 -> 0.9*1.0 + 0.1*0.5 = 0.95 -> 0.9*0.95 + 0.05 = 0.905.  on_update leaves it alone.
    A = (1, -1): w = (1, 1), std 0: 0.905 -> 0.8145.  With floor 0.97: 1.0 -> 0.95 floored to 0.97."""
    adv = torch.tensor([0.0, -3.0, 0.0, 3.0])
    t = Temperature("ema", init=1.0)
    t.on_rollout(adv)
    assert t.value == pytest.approx(0.95, abs=1e-6)
    t.on_update()
    assert t.value == pytest.approx(0.95, abs=1e-6)
    t.on_rollout(adv)
    assert t.value == pytest.approx(0.905, abs=1e-6)
    t.on_rollout(torch.tensor([1.0, -1.0]))
    assert t.value == pytest.approx(0.8145, abs=1e-6)

    floored = Temperature("ema", init=1.0, minimum=0.97)
    floored.on_rollout(adv)
    assert floored.value == pytest.approx(0.97, abs=1e-6)


def _ess(adv, t):
    return float(effective_sample_size(sampling_probs(adv, t.value)))


@pytest.mark.parametrize("init", [100.0, 1e-3])
def test_temperature_learnable_tracks_ess_target(init):
    """From T = 100 (ESS ~ 1, too flat) T must fall and ESS decrease; from T = 0.001 (ESS ~ 1/N, too
    peaked) T must rise and ESS increase; after 40 rollouts ESS is within 0.02 of the target 0.5."""
    adv = torch.randn(64, generator=torch.Generator().manual_seed(0))
    t = Temperature("learnable", init=init, ess_target=0.5)
    ess0 = _ess(adv, t)
    t.on_rollout(adv)
    assert (t.value < init) if init > 1 else (t.value > init)
    for _ in range(39):
        t.on_rollout(adv)
    ess = _ess(adv, t)
    assert abs(ess - 0.5) < 0.02
    assert abs(ess - 0.5) < abs(ess0 - 0.5) - 0.4      # started far (ESS ~1 or ~0.016), moved towards it
    t.on_update()                                       # the update hook does not touch a learnable T
    assert _ess(adv, t) == pytest.approx(ess)


def test_temperature_learnable_respects_floor():
    adv = torch.randn(64, generator=torch.Generator().manual_seed(0))
    t = Temperature("learnable", init=100.0, minimum=50.0)
    for _ in range(20):
        t.on_rollout(adv)
    assert t.value == pytest.approx(50.0, rel=1e-5)


# --------------------------------------------------------------------------------------------
# Importance correction
# --------------------------------------------------------------------------------------------

def test_importance_weights_are_inverse_n_p():
    """Every drawn index i carries weight 1/(N p_i); without correction the weights are None."""
    s = _sampler(ADV8, Temperature("fixed", 0.5), importance_correction=True, seed=5)
    p = s.probabilities()
    for idx, w in s.minibatches(4, 16):
        torch.testing.assert_close(w, 1.0 / (8 * p[idx]))
    s2 = _sampler(ADV8, Temperature("fixed", 0.5), importance_correction=False, seed=5)
    assert all(w is None for _, w in s2.minibatches(2, 4))


def _toy_regression():
    """Per-sample losses l_i(theta) = 0.5 (x_i . theta - y_i)^2, N = 8; the per-sample gradients grow
    with |A_i|, so a sampler that favours large |A| biases an unweighted gradient."""
    a = torch.tensor(ADV8, dtype=torch.float64)
    x = torch.stack([torch.ones(8, dtype=torch.float64), a.abs(), torch.linspace(-1, 1, 8, dtype=torch.float64)], 1)
    y = 2.0 * a.abs() ** 2
    theta = torch.tensor([0.5, -1.0, 0.3], dtype=torch.float64, requires_grad=True)

    def losses(idx=None):
        xi, yi = (x, y) if idx is None else (x[idx], y[idx])
        return 0.5 * (xi @ theta - yi) ** 2

    return theta, losses


def _grad(theta, loss):
    (g,) = torch.autograd.grad(loss, theta)
    return g


def _weights_by_index(sampler, n):
    """Collect the sampler's importance weight for each index from its own draws."""
    got = {}
    for idx, w in sampler.minibatches(50, 64):
        for i, wi in zip(idx.tolist(), w.tolist()):
            got.setdefault(i, wi)
    assert sorted(got) == list(range(n))
    return torch.tensor([got[i] for i in range(n)], dtype=torch.float64)


def test_importance_weighted_gradient_is_exactly_unbiased():
    """sum_i p_i * w_i * g_i (the exact expected weighted minibatch gradient, with the sampler's own
    weights w_i) equals the uniform mean gradient (1/N) sum_i g_i; the unweighted one sum_i p_i g_i does not."""
    s = _sampler(ADV8, Temperature("fixed", 0.3), importance_correction=True, seed=11)
    p = s.probabilities().double()
    w = _weights_by_index(s, 8)
    theta, losses = _toy_regression()
    uniform = _grad(theta, losses().mean())
    expected_weighted = _grad(theta, (p * w * losses()).sum())
    expected_unweighted = _grad(theta, (p * losses()).sum())
    torch.testing.assert_close(expected_weighted, uniform, rtol=1e-5, atol=1e-6)
    assert (expected_unweighted - uniform).abs().max() > 1.0


def test_importance_weighted_gradient_monte_carlo():
    """Average of 1000 minibatch gradients of mean(w * l) (minibatch 32, fixed seed) is within
    5 standard errors of the uniform gradient per coordinate; the unweighted average misses it by
    more than 20 standard errors."""
    theta, losses = _toy_regression()
    uniform = _grad(theta, losses().mean())
    results = {}
    for corrected in (True, False):
        s = _sampler(ADV8, Temperature("fixed", 0.3), importance_correction=corrected, seed=2024)
        grads = []
        for idx, w in s.minibatches(1000, 32):
            l = losses(idx)
            grads.append(_grad(theta, (l * w.double()).mean() if corrected else l.mean()))
        g = torch.stack(grads)
        results[corrected] = (g.mean(0), g.std(0) / math.sqrt(len(grads)))
    mean_w, se_w = results[True]
    mean_u, se_u = results[False]
    assert torch.all((mean_w - uniform).abs() <= 5 * se_w), (mean_w, uniform, se_w)
    assert torch.any((mean_u - uniform).abs() > 20 * se_u), (mean_u, uniform, se_u)


# --------------------------------------------------------------------------------------------
# Sliding window
# --------------------------------------------------------------------------------------------

def _ids_in_window(s):
    win = s.window()
    ids = win.actions
    # every field of a row belongs to the same transition
    torch.testing.assert_close(win.obs, torch.stack([ids, -ids], 1))
    torch.testing.assert_close(win.logp_old, -ids / 10)
    torch.testing.assert_close(win.values_old, 100 + ids)
    torch.testing.assert_close(win.returns, 1000 + ids)
    return sorted(int(i) for i in ids.tolist())


def test_window_keeps_most_recent():
    """capacity 5: add ids 0..2 (size 3, head 3), then 3..6 (size 5, head 7 % 5 = 2):
    the window holds exactly 2..6; adding 7 then overwrites the oldest, 2."""
    s = DynamicSampler(5, CPU, seed=0)
    with pytest.raises(ValueError):
        DynamicSampler(0, CPU)
    s.add(_transitions([0, 1, 2]))
    assert (s.size, s.head) == (3, 3)
    assert _ids_in_window(s) == [0, 1, 2]
    s.add(_transitions([3, 4, 5, 6]))
    assert (s.size, s.head) == (5, 2)
    assert _ids_in_window(s) == [2, 3, 4, 5, 6]
    s.add(_transitions([7]))
    assert (s.size, s.head) == (5, 3)
    assert _ids_in_window(s) == [3, 4, 5, 6, 7]


def test_window_batch_larger_than_capacity():
    """Adding 7 transitions (ids 10..16) to a capacity-5 window keeps the last five, 12..16;
    the next single add (17) then drops the oldest of those, 12."""
    s = DynamicSampler(5, CPU, seed=0)
    s.add(_transitions([0, 1]))
    s.add(_transitions(range(10, 17)))
    assert s.size == 5
    assert _ids_in_window(s) == [12, 13, 14, 15, 16]
    s.add(_transitions([17]))
    assert _ids_in_window(s) == [13, 14, 15, 16, 17]

    fresh = DynamicSampler(5, CPU, seed=0)
    fresh.add(_transitions(range(10, 17)))
    assert fresh.size == 5 and _ids_in_window(fresh) == [12, 13, 14, 15, 16]


def test_window_probabilities_follow_stored_advantages():
    """After the window wrapped, p is computed from the advantages of the surviving transitions only:
    a huge |A| that was dropped no longer matters (here all survivors have |A| = 1 -> uniform)."""
    s = DynamicSampler(3, CPU, Temperature("fixed", 0.1), seed=0)
    s.add(_transitions([0], [100.0]))
    s.add(_transitions([1, 2, 3], [1.0, -1.0, 1.0]))
    torch.testing.assert_close(s.probabilities(), torch.full((3,), 1 / 3))


# --------------------------------------------------------------------------------------------
# State round trip
# --------------------------------------------------------------------------------------------

def _draws(s, epochs=3):
    out = []
    for _ in range(epochs):
        for idx, w in s.minibatches(4, 8):
            out.append((idx.clone(), None if w is None else w.clone()))
    return out


@pytest.mark.parametrize("mode", ["fixed", "learnable"])
def test_state_dict_round_trip_reproduces_draws(mode):
    """Save mid-run through torch.save (as the checkpoint does), load into a sampler with another
    seed, temperature and contents: window, T and all subsequent draws and weights are identical."""
    adv = torch.randn(12, generator=torch.Generator().manual_seed(4))
    a = DynamicSampler(10, CPU, Temperature(mode, init=0.8), importance_correction=True, seed=1)
    a.add(_transitions(range(12), adv))
    a.temperature.on_rollout(a.window().advantages)
    _draws(a, 1)                                        # advance the generator
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=False)

    b = DynamicSampler(10, CPU, Temperature(mode, init=3.0), importance_correction=True, seed=999)
    b.add(_transitions([50, 51]))
    b.load_state_dict(state)
    assert (b.size, b.head) == (a.size, a.head)
    for x, y in zip(a.window(), b.window()):
        torch.testing.assert_close(x, y)
    assert b.temperature.value == pytest.approx(a.temperature.value)
    # the temperature rule continues identically (incl. Adam's state for the learnable one)
    a.temperature.on_rollout(a.window().advantages)
    b.temperature.on_rollout(b.window().advantages)
    assert b.temperature.value == pytest.approx(a.temperature.value, rel=1e-6)
    for (ia, wa), (ib, wb) in zip(_draws(a), _draws(b)):
        assert torch.equal(ia, ib)
        torch.testing.assert_close(wa, wb)


def test_different_seeds_give_different_draws():
    """Guard for the round-trip test: without loading the state, another seed draws differently."""
    a = _sampler(ADV8, Temperature("fixed", 1.0), seed=1)
    b = _sampler(ADV8, Temperature("fixed", 1.0), seed=2)
    assert any(not torch.equal(x[0], y[0]) for x, y in zip(_draws(a), _draws(b)))


def test_systematic_draws_hand_counts():
    """p = (1/2, 1/4, 1/4), m = 4: the points (u + k)/4 fall twice in [0, .5) and once in each quarter."""
    from core.algo.sampler import systematic_draws
    p = torch.tensor([0.5, 0.25, 0.25])
    for seed in range(5):
        draws = systematic_draws(p, 4, torch.Generator().manual_seed(seed))
        assert torch.bincount(draws, minlength=3).tolist() == [2, 1, 1]


def test_systematic_counts_are_floor_or_ceil_of_expected():
    from core.algo.sampler import systematic_draws
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(50, generator=g) * 2, 0)
    m = 320
    counts = torch.bincount(systematic_draws(p, m, g), minlength=50).double()
    expected = m * p.double()
    assert counts.sum() == m
    assert bool(((counts >= expected.floor()) & (counts <= expected.ceil())).all())


def test_systematic_uniform_visits_each_transition_once_per_epoch():
    adv = torch.randn(64)
    s = _sampler(adv, temperature=Temperature("fixed", 1e9), resampling="systematic")
    idx = torch.cat([i for i, _ in s.minibatches(4, 16)])
    assert sorted(idx.tolist()) == list(range(64))


def test_draws_without_replacement_never_repeat_within_a_round():
    from core.algo.sampler import draws_without_replacement
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(40, generator=g), 0)
    assert sorted(draws_without_replacement(p, 40, g).tolist()) == list(range(40))  # m = N: a permutation
    half = draws_without_replacement(p, 20, g)
    assert half.unique().numel() == 20
    counts = torch.bincount(draws_without_replacement(p, 100, g), minlength=40)  # 40 + 40 + 20
    assert counts.sum() == 100 and int(counts.min()) >= 2 and int(counts.max()) <= 3


def test_draws_without_replacement_select_large_p():
    """p = (0.97, 0.01, 0.01, 0.01), 2 draws: index 0 is missed only if both draws avoid it,
    P = 0.03 * (1 - 0.97 / 0.99) = 6e-4, so it is in (almost) every pair; an index of p 0.01 is in
    P = 0.01 + 0.97 * 0.01/0.03 + 2 * 0.01 * 0.01/0.99 ~= 0.34 of them."""
    from core.algo.sampler import draws_without_replacement
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.97, 0.01, 0.01, 0.01])
    pairs = [draws_without_replacement(p, 2, g) for _ in range(2000)]
    assert all(pair.unique().numel() == 2 for pair in pairs)
    assert sum(0 in pair.tolist() for pair in pairs) >= 1990
    share_1 = sum(1 in pair.tolist() for pair in pairs) / 2000
    assert abs(share_1 - (0.01 + 0.97 * 0.01 / 0.03 + 2 * 0.01 * 0.01 / 0.99)) < 0.04


def test_sampler_without_replacement_selects_from_a_window_of_two_rollouts():
    """Window 8 (two rollouts of 4), epoch of 4 draws: distinct transitions, and the large-|A| ones
    (ids 4-7 here) are picked more often than the small ones."""
    s = DynamicSampler(8, CPU, Temperature("fixed", 0.1), resampling="without-replacement")
    s.add(_transitions(range(4), [0.1, 0.1, 0.1, 0.1]))
    s.add(_transitions(range(4, 8), [5.0, -5.0, 5.0, -5.0]))
    picks = []
    for _ in range(200):
        idx = torch.cat([i for i, _ in s.minibatches(2, 2)])
        assert idx.unique().numel() == 4
        picks += s.window().actions[idx].tolist()
    assert sum(a >= 4 for a in picks) > 0.9 * len(picks)


def test_without_replacement_refuses_importance_correction():
    from core.config.errors import ConfigError
    from core.run.presets import resolve
    with pytest.raises(ConfigError, match="without-replacement"):
        resolve(dict(env="Pendulum-v1", algo="dapo", dynamic_sampling=True, resampling="without-replacement",
                     importance_correction=True), "continuous")


def test_unknown_resampling_rejected():
    with pytest.raises(ValueError, match="resampling"):
        DynamicSampler(4, CPU, resampling="stratified")


# --------------------------------------------------------------------------------------------
# resampling="weighted": the draws' expected gradient, without the draws
# --------------------------------------------------------------------------------------------
def test_weighted_resampling_is_a_permutation_weighted_by_n_p():
    """adv (0, 2) at T=1: w = (0, 1), p = (1, e) / (1 + e), so the weights N p are 2 / (1 + e) = 0.5379
    and 2e / (1 + e) = 1.4621, and every epoch visits both transitions once."""
    s = _sampler([0.0, 2.0], temperature=Temperature("fixed", 1.0), resampling="weighted")
    expected = {0: 2 / (1 + math.e), 1: 2 * math.e / (1 + math.e)}
    for _ in range(5):
        ((idx, w),) = list(s.minibatches(1, 2))
        assert sorted(idx.tolist()) == [0, 1]
        for i, wi in zip(idx.tolist(), w.tolist()):
            assert wi == pytest.approx(expected[i], abs=1e-6)


def test_weighted_epoch_mean_equals_the_expectation_of_multinomial_draws():
    """For any per-transition quantity g (a loss or a gradient), one weighted epoch's mean of ``w * g`` is
    exactly ``sum_i p_i g_i``, which multinomial draws from the same p reach only on average."""
    g = torch.Generator().manual_seed(5)
    adv, per_sample = torch.randn(64, generator=g), torch.randn(64, generator=g, dtype=torch.float64)
    weighted = _sampler(adv, temperature=Temperature("fixed", 0.3), resampling="weighted")
    epoch = list(weighted.minibatches(4, 16))
    assert sorted(torch.cat([i for i, _ in epoch]).tolist()) == list(range(64))
    weighted_mean = sum(float((w.double() * per_sample[i]).sum()) for i, w in epoch) / 64
    target = float((weighted.probabilities().double() * per_sample).sum())
    assert weighted_mean == pytest.approx(target, abs=1e-6)

    drawn = _sampler(adv, temperature=Temperature("fixed", 0.3), resampling="multinomial")
    epoch_means = torch.tensor([float(per_sample[torch.cat([i for i, _ in drawn.minibatches(4, 16)])].mean())
                                for _ in range(2000)])
    assert abs(float(epoch_means.mean()) - target) < 5 * float(epoch_means.std()) / math.sqrt(2000)
    assert float(epoch_means.std()) > 0.05  # the draw noise the weighted epoch does not have


def test_weighted_resampling_refuses_importance_correction():
    from core.config.errors import ConfigError
    from core.run.presets import resolve
    with pytest.raises(ValueError, match="uniform minibatches"):
        _sampler([1.0, 2.0], importance_correction=True, resampling="weighted")
    with pytest.raises(ConfigError, match="--resampling weighted"):
        resolve(dict(env="Pendulum-v1", algo="dapo", dynamic_sampling=True, resampling="weighted",
                     importance_correction=True), "continuous")


def test_weighted_resampling_weights_the_policy_loss_too(tmp_path, small_config):
    """The weights N p_i stand for the draws, which shape the policy's and the critic's minibatches alike."""
    from core.training.trainer import Trainer
    t = Trainer(small_config(tmp_path / "w", resampling="weighted"), tmp_path / "w")
    t.iterate()
    assert t.sampler.weights_scope == "all" and all(w is not None for _, w in t.sampler.minibatches(4, 64))
    plain = Trainer(small_config(tmp_path / "m"), tmp_path / "m")
    plain.iterate()
    assert all(w is None for _, w in plain.sampler.minibatches(4, 64))  # no correction, no weights
