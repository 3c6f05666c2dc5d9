"""Mid-episode env state (core/envs/state.py): a MuJoCo env restored into a fresh instance continues exactly."""
import gymnasium as gym
import numpy as np
import pytest

from core.envs.state import env_state, set_env_state


def _steps(env, actions):
    out = []
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        out.append((obs.copy(), reward, terminated, {k: v for k, v in info.items() if np.ndim(v) == 0}))
        if terminated or truncated:
            break
    return out


@pytest.mark.parametrize("env_id", ["Humanoid-v5", "Ant-v5", "HalfCheetah-v5"])
def test_a_restored_mujoco_env_continues_exactly(env_id):
    """Humanoid and Ant read body positions before stepping (their forward reward); those are one substep stale
    after a step, and a restore that only recomputed them changed Humanoid's first reward by ~1e-4."""
    actions = np.random.default_rng(0).uniform(-0.4, 0.4, (40, *gym.make(env_id).action_space.shape))
    env = gym.make(env_id)
    env.reset(seed=1)
    _steps(env, actions[:5])
    state = env_state(env)
    fresh = gym.make(env_id)
    fresh.reset(seed=7)  # another episode start: everything must come from the state
    set_env_state(fresh, state)
    expected, got = _steps(env, actions[5:]), _steps(fresh, actions[5:])
    assert len(got) == len(expected) > 3
    for (o1, r1, t1, i1), (o2, r2, t2, i2) in zip(expected, got):
        assert np.array_equal(o1, o2) and r1 == r2 and t1 == t2 and i1 == i2


def test_a_state_saved_before_body_positions_still_restores():
    """Checkpoints written before the body positions were saved restore as before (positions recomputed)."""
    env = gym.make("Ant-v5")
    env.reset(seed=1)
    state = env_state(env)
    del state["mujoco_positions"]
    fresh = gym.make("Ant-v5")
    fresh.reset(seed=2)
    set_env_state(fresh, state)
    assert np.array_equal(fresh.unwrapped.data.qpos, env.unwrapped.data.qpos)
