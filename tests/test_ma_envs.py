"""PettingZoo wrapper and batched env: API compliance, shapes, episode ends, exact state restore."""
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from dapo_ma.envs import BatchedParallelEnv, check_env_name, env_spec, make_parallel_env


@pytest.mark.parametrize("name,kwargs", [
    ("simple_spread_v3", {"N": 3, "max_cycles": 25}),
    ("simple_speaker_listener_v4", {}),                     # observation sizes 3 and 11: padded
    ("simple_adversary_v3", {"continuous_actions": True}),
])
def test_padded_wrapper_passes_parallel_api_test(name, kwargs):
    env = make_parallel_env(name, kwargs)
    parallel_api_test(env, num_cycles=30)


def test_heterogeneous_agents_stack():
    spec = env_spec("simple_speaker_listener_v4", {})
    assert spec.agents == ("speaker_0", "listener_0") and spec.obs_dim == 11
    assert spec.layout.discrete and spec.layout.size == 5
    assert spec.layout.mask.tolist() == [[True] * 3 + [False] * 2, [True] * 5]


def test_module_paths_are_accepted():
    check_env_name("mpe2.simple_v3")


def test_batched_shapes_and_truncation_at_max_cycles():
    envs = BatchedParallelEnv("simple_spread_v3", {"N": 3, "max_cycles": 5}, num_envs=2, seed=0)
    assert envs.obs.shape == (2, 3, 18)
    for t in range(5):
        out = envs.step(np.zeros((2, 3), dtype=np.int64))
        assert out.obs.shape == (2, 3, 18) and out.rewards.shape == (2, 3)
    assert out.truncated.all() and not out.terminated.any()     # MPE: everyone truncated together
    assert len(out.episodes) == 2 and out.episodes[0].length == 5 and out.episodes[0].returns.shape == (3,)
    assert np.abs(out.final_obs).sum() > 0 and not np.allclose(out.final_obs, out.obs)  # reset happened


def test_continuous_actions_are_clipped_into_the_box():
    envs = BatchedParallelEnv("simple_spread_v3", {"N": 2, "continuous_actions": True}, num_envs=1, seed=0)
    assert not envs.spec.layout.discrete and envs.spec.layout.size == 5
    envs.step(np.full((1, 2, 5), 7.0))  # out of [0, 1]: clipped, not rejected by the env


def test_state_restore_continues_episodes_exactly():
    a = BatchedParallelEnv("simple_spread_v3", {"N": 3, "max_cycles": 25}, num_envs=2, seed=3)
    rng = np.random.default_rng(0)
    for _ in range(7):
        a.step(rng.integers(0, 5, (2, 3)))
    state = a.state_dict()
    b = BatchedParallelEnv("simple_spread_v3", {"N": 3, "max_cycles": 25}, num_envs=2, seed=99)
    b.load_state_dict(state)
    for _ in range(30):  # across an episode end and reset
        act = rng.integers(0, 5, (2, 3))
        oa, ob = a.step(act), b.step(act)
        assert np.array_equal(oa.obs, ob.obs) and np.array_equal(oa.rewards, ob.rewards)
