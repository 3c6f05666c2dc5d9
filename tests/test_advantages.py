"""GAE (``core.algo.advantages.gae`` + ``next_state_values``) and GRPO's ``AutoLambda`` (docs/algorithms.md sections 1 and 3).

1. A 3-step, 2-env toy with gamma = lam = 0.5 worked out by hand: env 0 *terminates* at t=1 (no
   bootstrap, its final value is deliberately absurd), env 1 is *truncated* at t=1 (bootstraps from
   the final observation's value).
2. Random rollouts (T=64, N=4, terminations and truncations) against Stable-Baselines3's
   ``RolloutBuffer.compute_returns_and_advantage``, which handles truncation by adding
   ``gamma * V(final_obs)`` to the truncated step's reward and cuts the recursion through
   ``episode_starts`` (and the ``dones`` argument for the last step).
3. ``AutoLambda``: targets, EMA arithmetic with hand numbers, NaN handling, state round trip.
"""
import math

import numpy as np
import pytest
import torch

from core.algo.advantages import AutoLambda, gae, next_state_values

F, T_ = False, True


def _toy():
    """T=3, N=2 (columns = envs), all rewards 1, V(s_t) = (1, 2, 4) in both envs, V after rollout = 8."""
    rewards = torch.ones(3, 2, dtype=torch.float64)
    values = torch.tensor([[1.0, 1.0], [2.0, 2.0], [4.0, 4.0]], dtype=torch.float64)
    last_values = torch.tensor([8.0, 8.0], dtype=torch.float64)
    dones = torch.tensor([[F, F], [T_, T_], [F, F]])
    terminated = torch.tensor([[F, F], [T_, F], [F, F]])          # env 0 terminates, env 1 truncated
    final_values = torch.zeros(3, 2, dtype=torch.float64)
    final_values[1, 0] = 100.0   # env 0's terminal state value: must be ignored
    final_values[1, 1] = 10.0    # env 1's truncated final observation: bootstrapped
    return rewards, values, last_values, dones, terminated, final_values


def test_next_state_values_toy():
    """Successor values: t=0 -> V(s_1) = 2; t=1 -> final_values (100 / 10); t=2 -> last_values 8."""
    _, values, last_values, dones, _, final_values = _toy()
    nv = next_state_values(values, last_values, dones, final_values)
    expected = torch.tensor([[2.0, 2.0], [100.0, 10.0], [8.0, 8.0]], dtype=torch.float64)
    torch.testing.assert_close(nv, expected)


def test_gae_hand_toy_termination_and_truncation():
    """gamma = 0.5, lam = 0.5 (gamma*lam = 0.25).
    deltas  delta_t = r + gamma * V(s_{t+1}) * (1 - term) - V(s_t):
      env 0: t2 = 1 + 0.5*8 - 4 = 1;  t1 = 1 + 0 - 2 = -1 (terminated);  t0 = 1 + 0.5*2 - 1 = 1
      env 1: t2 = 1;                  t1 = 1 + 0.5*10 - 2 = 4 (truncated); t0 = 1
    advantages  A_t = delta_t + 0.25 * (1 - done_t) * A_{t+1}:
      env 0: A2 = 1;  A1 = -1 (done: no carry);  A0 = 1 + 0.25*(-1) = 0.75
      env 1: A2 = 1;  A1 = 4;                    A0 = 1 + 0.25*4 = 2
    returns = A + V: env 0 (1.75, 1, 5), env 1 (3, 6, 5)."""
    rewards, values, last_values, dones, terminated, final_values = _toy()
    nv = next_state_values(values, last_values, dones, final_values)
    adv, ret = gae(rewards, values, nv, terminated, dones, gamma=0.5, lam=0.5)
    torch.testing.assert_close(adv, torch.tensor([[0.75, 2.0], [-1.0, 4.0], [1.0, 1.0]], dtype=torch.float64))
    torch.testing.assert_close(ret, torch.tensor([[1.75, 3.0], [1.0, 6.0], [5.0, 5.0]], dtype=torch.float64))


def test_gae_lambda_extremes_single_env():
    """One env, no episode end, r = (1, 1), V = (0, 0), V_last = 4, gamma = 0.5.
    lam = 0 (TD(0)): A = delta = (1 + 0.5*0, 1 + 0.5*4) = (1, 3).
    lam = 1 (Monte-Carlo with bootstrap): A1 = 3, A0 = 1 + 0.5*3 = 2.5 (= 1 + 0.5*1 + 0.25*4)."""
    r = torch.ones(2, 1)
    v = torch.zeros(2, 1)
    nv = next_state_values(v, torch.tensor([4.0]), torch.zeros(2, 1, dtype=torch.bool), torch.zeros(2, 1))
    no = torch.zeros(2, 1, dtype=torch.bool)
    a0, _ = gae(r, v, nv, no, no, gamma=0.5, lam=0.0)
    a1, _ = gae(r, v, nv, no, no, gamma=0.5, lam=1.0)
    torch.testing.assert_close(a0, torch.tensor([[1.0], [3.0]]))
    torch.testing.assert_close(a1, torch.tensor([[2.5], [3.0]]))


# --------------------------------------------------------------------------------------------
# Cross-check against Stable-Baselines3
# --------------------------------------------------------------------------------------------

def _random_rollout(seed, t_len=64, n_envs=4):
    g = np.random.default_rng(seed)
    rewards = g.normal(size=(t_len, n_envs)).astype(np.float32)
    values = g.normal(size=(t_len, n_envs)).astype(np.float32)
    last_values = g.normal(size=n_envs).astype(np.float32)
    final_values = g.normal(size=(t_len, n_envs)).astype(np.float32)
    u = g.random((t_len, n_envs))
    terminated = u < 0.08
    truncated = (u >= 0.08) & (u < 0.16)
    # make sure both kinds of episode end also occur on the last step (SB3's `dones` argument path)
    terminated[-1, 0], truncated[-1, 0] = True, False
    terminated[-1, 1], truncated[-1, 1] = False, True
    terminated[-1, 2:], truncated[-1, 2:] = False, False
    return rewards, values, last_values, final_values, terminated, truncated


def _sb3_gae(rewards, values, last_values, final_values, terminated, truncated, gamma, lam):
    import gymnasium as gym
    from stable_baselines3.common.buffers import RolloutBuffer

    t_len, n_envs = rewards.shape
    box = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    buf = RolloutBuffer(t_len, box, box, device="cpu", gae_lambda=lam, gamma=gamma, n_envs=n_envs)
    dones = terminated | truncated
    # SB3's truncation fix: bootstrap the truncated step by adding gamma * V(final_obs) to its reward
    sb3_rewards = rewards + gamma * final_values * truncated
    start_before_rollout = np.array([True, False, True, False])  # never read by SB3's GAE
    for t in range(t_len):
        episode_start = start_before_rollout if t == 0 else dones[t - 1]
        buf.add(np.zeros((n_envs, 1), np.float32), np.zeros((n_envs, 1), np.float32), sb3_rewards[t],
                episode_start.astype(np.float32), torch.as_tensor(values[t]), torch.zeros(n_envs))
    buf.compute_returns_and_advantage(last_values=torch.as_tensor(last_values), dones=dones[-1])
    return buf.advantages, buf.returns


@pytest.mark.parametrize("seed,gamma,lam", [(0, 0.99, 0.95), (1, 0.9, 0.8), (2, 0.5, 1.0)])
def test_gae_matches_stable_baselines3(seed, gamma, lam):
    rewards, values, last_values, final_values, terminated, truncated = _random_rollout(seed)
    assert terminated[:-1].any() and truncated[:-1].any()          # both kinds occur mid-rollout
    sb3_adv, sb3_ret = _sb3_gae(rewards, values, last_values, final_values, terminated, truncated, gamma, lam)

    t = lambda a: torch.as_tensor(a)
    dones = t(terminated | truncated)
    nv = next_state_values(t(values), t(last_values), dones, t(final_values))
    adv, ret = gae(t(rewards), t(values), nv, t(terminated), dones, gamma, lam)
    np.testing.assert_allclose(adv.numpy(), sb3_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret.numpy(), sb3_ret, rtol=1e-5, atol=1e-5)


def test_sb3_comparison_is_sensitive_to_truncation_handling():
    """Guard for the test above: treating truncations as terminations changes the advantages,
    so the SB3 agreement really checks the bootstrap from ``final_values``."""
    rewards, values, last_values, final_values, terminated, truncated = _random_rollout(0)
    sb3_adv, _ = _sb3_gae(rewards, values, last_values, final_values, terminated, truncated, 0.99, 0.95)
    t = lambda a: torch.as_tensor(a)
    dones = t(terminated | truncated)
    nv = next_state_values(t(values), t(last_values), dones, t(final_values))
    wrong, _ = gae(t(rewards), t(values), nv, dones, dones, 0.99, 0.95)   # every end as a termination
    assert not np.allclose(wrong.numpy(), sb3_adv, atol=1e-3)


# --------------------------------------------------------------------------------------------
# AutoLambda (lambda_min = 0.9, lambda_max = 0.99, EMA 0.9)
# --------------------------------------------------------------------------------------------

def _auto(init=0.95):
    return AutoLambda(init, lambda_min=0.9, lambda_max=0.99)


def test_autolambda_perfect_critic_converges_to_lambda_min():
    a = _auto()
    for _ in range(300):
        a.update(1.0)
    assert a.value == pytest.approx(0.9, abs=1e-9)


def test_autolambda_useless_critic_converges_to_lambda_max():
    """EV <= 0 (0 and negative values) -> target lambda_max = 0.99."""
    for ev in (0.0, -5.0):
        a = _auto()
        for _ in range(300):
            a.update(ev)
        assert a.value == pytest.approx(0.99, abs=1e-9)


def test_autolambda_ema_hand_numbers():
    """init 0.95:
    EV=1   -> target 0.9:  0.9*0.95 + 0.1*0.9   = 0.855 + 0.09   = 0.945
    EV=0   -> target 0.99: 0.9*0.945 + 0.1*0.99 = 0.8505 + 0.099 = 0.9495
    EV=0.5 -> target 0.99 - 0.09*0.5 = 0.945: 0.9*0.9495 + 0.0945 = 0.85455 + 0.0945 = 0.94905
    EV=3   -> clipped to 1, target 0.9: 0.9*0.94905 + 0.09 = 0.854145 + 0.09 = 0.944145"""
    a = _auto()
    assert a.update(1.0) == pytest.approx(0.945, abs=1e-12)
    assert a.update(0.0) == pytest.approx(0.9495, abs=1e-12)
    assert a.update(0.5) == pytest.approx(0.94905, abs=1e-12)
    assert a.update(3.0) == pytest.approx(0.944145, abs=1e-12)
    assert a.value == pytest.approx(0.944145, abs=1e-12)


def test_autolambda_nan_leaves_value_unchanged():
    a = _auto(0.93)
    assert a.update(float("nan")) == 0.93
    assert a.value == 0.93
    assert a.update(math.nan) == 0.93


def test_autolambda_state_dict_round_trip():
    a = _auto()
    for ev in (0.2, 0.9, -1.0):
        a.update(ev)
    b = _auto(0.5)
    b.load_state_dict(a.state_dict())
    assert b.value == a.value
    assert b.update(0.7) == a.update(0.7)
