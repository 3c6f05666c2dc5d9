"""Observation and reward normalisation (``core.envs.make``: RunningMeanStd, ObsNormalizer, RewardScaler).

RunningMeanStd's batched (Chan et al.) update must equal the plain statistics of all data seen,
where the initial state (mean 0, var 1, count 1e-4) acts as a tiny prior pseudo-sample.
ObsNormalizer standardises and clips to +-10, and is the identity when disabled.  RewardScaler
divides by the running std of each env's discounted return and restarts that return after ``done``.
"""
import numpy as np
import pytest

from core.envs.rollout import ObsNormalizer, RewardScaler, RunningMeanStd


def _batches(sizes, seed=0):
    g = np.random.default_rng(seed)
    return [g.normal(loc=[3.0, -1.0, 0.5], scale=[2.0, 0.5, 1.0], size=(n, 3)) for n in sizes]


# --------------------------------------------------------------------------------------------
# RunningMeanStd
# --------------------------------------------------------------------------------------------

def test_running_mean_std_matches_numpy_on_concatenated_data():
    """Batches of 5, 17, 1, 4000 and 8000 rows (float64): mean and (population) var equal numpy's on
    the concatenation to 1e-6 (the 1e-4 prior count shifts them by < 1e-7 with 12 023 rows)."""
    batches = _batches([5, 17, 1, 4000, 8000])
    rms = RunningMeanStd((3,))
    for b in batches:
        rms.update(b)
    data = np.concatenate(batches)
    assert rms.mean.dtype == np.float64 and rms.var.dtype == np.float64
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=0, atol=1e-6)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=0, atol=1e-6)
    assert rms.count == pytest.approx(12_023 + 1e-4, abs=1e-9)


def test_running_mean_std_float32_batches():
    """The same with float32 batches (what ObsNormalizer passes): the batch moments are then taken in
    float32, so agreement is to float32 precision (1e-5 relative), statistics stay float64."""
    batches = [b.astype(np.float32) for b in _batches([5, 17, 1, 4000, 8000])]
    rms = RunningMeanStd((3,))
    for b in batches:
        rms.update(b)
    data = np.concatenate(batches).astype(np.float64)
    assert rms.mean.dtype == np.float64
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-5)


def test_running_mean_std_small_data_with_prior_pseudo_sample():
    """Few rows, where the initial (mean 0, var 1, count c = 1e-4) matters: the result equals the
    pooled statistics of the data plus a pseudo-sample of weight c at mean 0 with variance 1:
    mean = sum(x) / (n + c),  var = (c*(1 + 0^2) + sum(x^2)) / (n + c) - mean^2."""
    batches = _batches([2, 3, 1], seed=1)
    rms = RunningMeanStd((3,))
    for b in batches:
        rms.update(b)
    x = np.concatenate(batches)
    c, n = 1e-4, len(x)
    mean = x.sum(0) / (n + c)
    var = (c * 1.0 + (x ** 2).sum(0)) / (n + c) - mean ** 2
    np.testing.assert_allclose(rms.mean, mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rms.var, var, rtol=1e-9, atol=1e-12)
    # and ~numpy to the prior's size
    np.testing.assert_allclose(rms.mean, x.mean(0), atol=1e-4)
    np.testing.assert_allclose(rms.var, x.var(0), atol=1e-3)


def test_running_mean_std_hand_numbers():
    """Batches [[1], [3]] then [[5]]: data (1, 3, 5) has mean 3 and population var 8/3 = 2.666667
    (up to the 1e-4 prior)."""
    rms = RunningMeanStd((1,))
    rms.update(np.array([[1.0], [3.0]]))
    rms.update(np.array([[5.0]]))
    assert rms.mean.item() == pytest.approx(3.0, abs=2e-4)
    assert rms.var.item() == pytest.approx(2.666667, abs=5e-4)


def test_running_mean_std_state_round_trip():
    a = RunningMeanStd((3,))
    a.update(_batches([10])[0])
    b = RunningMeanStd((3,))
    b.load_state_dict(a.state_dict())
    nxt = _batches([7], seed=3)[0]
    a.update(nxt)
    b.update(nxt)
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.var, b.var)
    assert a.count == b.count


# --------------------------------------------------------------------------------------------
# ObsNormalizer
# --------------------------------------------------------------------------------------------

def _normalizer_with(mean, var):
    n = ObsNormalizer((1,), enabled=True)
    n.load_state_dict({"mean": np.array([mean]), "var": np.array([var]), "count": 10.0})
    return n


def test_obs_normalizer_standardises_and_clips():
    """mean 2, var 4 (std 2): 3 -> 0.5;  2 -> 0;  -4 -> -3;  100 -> 49 -> clipped to 10;
    -100 -> -51 -> clipped to -10.  Output is float32; update=False leaves the statistics alone."""
    n = _normalizer_with(2.0, 4.0)
    out = n(np.array([[3.0], [2.0], [-4.0], [100.0], [-100.0]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.5], [0.0], [-3.0], [10.0], [-10.0]], rtol=0, atol=1e-6)
    assert n.rms.mean.item() == 2.0 and n.rms.var.item() == 4.0 and n.rms.count == 10.0


def test_obs_normalizer_update_then_standardise():
    """update() folds the batch in first: 20 000 rows of N(5, 3^2) come out with mean ~0, std ~1,
    all within +-10."""
    x = np.random.default_rng(0).normal(5.0, 3.0, size=(20_000, 1))
    n = ObsNormalizer((1,), enabled=True)
    n.update(x)
    out = n(x)
    assert n.rms.count == pytest.approx(20_000, abs=1e-3)
    assert abs(out.mean()) < 1e-3
    assert out.std() == pytest.approx(1.0, abs=1e-3)
    assert np.abs(out).max() <= 10.0


def test_obs_normalizer_disabled_is_identity():
    """Disabled: values pass through unchanged (no standardising, no clipping), statistics untouched."""
    n = ObsNormalizer((2,), enabled=False)
    obs = np.array([[1e6, -3.0], [0.25, 42.0]], dtype=np.float32)
    n.update(obs)
    out = n(obs)
    np.testing.assert_array_equal(out, obs)
    np.testing.assert_array_equal(n.rms.mean, np.zeros(2))
    assert n.rms.count == 1e-4


# --------------------------------------------------------------------------------------------
# RewardScaler
# --------------------------------------------------------------------------------------------

F, T = False, True


def test_reward_scaler_resets_discounted_return_on_done():
    """gamma 0.5, 2 envs; the running return G <- 0.5*G + r is fed to the statistics, then zeroed
    where done:
      step 1: r (1, 1), done (F, T): G = (1, 1) -> stored (1, 0)
      step 2: r (1, 1), done (F, F): G = (1.5, 1)        (env 1 restarted; without reset: 1.5)
      step 3: r (2, 2), done (T, F): G = (2.75, 2.5) -> stored (0, 2.5)
    Statistics of (1, 1, 1.5, 1, 2.75, 2.5): mean 9.75/6 = 1.625, var 19.0625/6 - 1.625^2 = 0.536458,
    std 0.732433; step 3 output = 2 / 0.732433 = 2.730627 for both envs."""
    s = RewardScaler(num_envs=2, gamma=0.5, enabled=True)
    s(np.array([1.0, 1.0]), np.array([F, T]))
    np.testing.assert_allclose(s.discounted, [1.0, 0.0])
    s(np.array([1.0, 1.0]), np.array([F, F]))
    np.testing.assert_allclose(s.discounted, [1.5, 1.0])
    out = s(np.array([2.0, 2.0]), np.array([T, F]))
    np.testing.assert_allclose(s.discounted, [0.0, 2.5])
    assert s.rms.mean.item() == pytest.approx(1.625, abs=1e-4)
    assert s.rms.var.item() == pytest.approx(0.536458, abs=1e-4)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [2.730627, 2.730627], rtol=0, atol=5e-4)


def test_reward_scaler_clips_to_ten():
    """First step, equal rewards in both envs: the running var is ~1e-4 (only the prior), so
    1 / sqrt(1e-4) = 100 is clipped to 10 (and -1 to -10)."""
    s = RewardScaler(num_envs=2, gamma=0.99, enabled=True)
    np.testing.assert_allclose(s(np.array([1.0, 1.0]), np.array([F, F])), [10.0, 10.0])
    s2 = RewardScaler(num_envs=2, gamma=0.99, enabled=True)
    np.testing.assert_allclose(s2(np.array([-1.0, -1.0]), np.array([F, F])), [-10.0, -10.0])


def test_reward_scaler_disabled_is_identity():
    s = RewardScaler(num_envs=2, gamma=0.99, enabled=False)
    r = np.array([3.0, -7.0], dtype=np.float32)
    np.testing.assert_array_equal(s(r, np.array([T, F])), r)
    np.testing.assert_array_equal(s.discounted, np.zeros(2))


def test_reward_scaler_state_round_trip():
    """A restored scaler continues with the same running return and statistics."""
    a = RewardScaler(num_envs=2, gamma=0.9, enabled=True)
    rng = np.random.default_rng(0)
    for _ in range(5):
        a(rng.normal(size=2), rng.random(2) < 0.3)
    b = RewardScaler(num_envs=2, gamma=0.9, enabled=True)
    b.load_state_dict(a.state_dict())
    r, d = np.array([0.5, -1.5]), np.array([F, T])
    np.testing.assert_array_equal(a(r, d), b(r, d))
    np.testing.assert_array_equal(a.discounted, b.discounted)
