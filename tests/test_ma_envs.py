"""PettingZoo wrapper and batched env: API compliance, shapes, episode ends, exact state restore."""
import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import ParallelEnv
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
    check_env_name(__name__)  # this module defines parallel_env()


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


class _ToyEnv(ParallelEnv):
    """Two agents; ``a`` terminates at step 2 (its episode ends early), ``b`` would run on."""

    metadata = {"name": "toy_v0"}

    def __init__(self):
        self.possible_agents = ["a", "b"]
        self.agents = []

    def observation_space(self, agent):
        return gym.spaces.Box(-1, 1, (2 if agent == "a" else 3,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return {a: self.observation_space(a).sample() * 0 for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs = {a: np.full(self.observation_space(a).shape, 0.5, np.float32) for a in self.agents}
        term = {"a": self.t >= 2, "b": False}
        trunc = {a: False for a in self.agents}
        rewards = {a: 1.0 for a in self.agents}
        self.agents = [a for a in self.agents if not term[a]]
        return obs, rewards, term, trunc, {a: {} for a in obs}


def parallel_env():
    return _ToyEnv()


def test_early_termination_ends_the_copy_and_bootstraps_only_the_others():
    envs = BatchedParallelEnv(__name__, {}, num_envs=1, seed=0)
    assert envs.obs.shape == (1, 2, 3)  # a's 2-dim observation padded to 3
    envs.step(np.zeros((1, 2), dtype=np.int64))
    out = envs.step(np.zeros((1, 2), dtype=np.int64))
    assert out.terminated.tolist() == [[True, False]] and out.truncated.tolist() == [[False, True]]
    assert out.episodes[0].length == 2 and out.episodes[0].returns.tolist() == [2.0, 2.0]
    assert np.allclose(out.final_obs[0, 1], 0.5) and np.allclose(out.obs, 0.0)  # reset after the end


def test_on_policy_trainer_handles_termination(tmp_path):
    from dapo_ma.config import MAConfig, resolve
    from dapo_ma.ppo import OnPolicyMATrainer

    cfg = resolve(MAConfig(env=__name__, algo="dapo-ma", total_steps=40, num_envs=2, num_steps=5,
                           num_minibatches=2, run_dir=str(tmp_path)))
    t = OnPolicyMATrainer(cfg, tmp_path)
    metrics = t.iterate()
    assert metrics["rollout/episodes"] == 4 and metrics["rollout/ep_length_mean"] == 2


@pytest.mark.parametrize("name,kwargs", [
    ("simple_spread_v3", {"N": 3}), ("simple_spread_v3", {"N": 2, "continuous_actions": True}),
    ("simple_tag_v3", {}), ("simple_reference_v3", {}), ("simple_speaker_listener_v4", {"continuous_actions": True}),
    ("simple_adversary_v3", {"max_cycles": 7})])
def test_the_direct_mpe_step_equals_pettingzoos_parallel_step(name, kwargs):
    """dapo_ma.mpe_step against mpe2's parallel_env (PettingZoo's AEC-to-parallel loop) on random episodes."""
    fast, reference = make_parallel_env(name, kwargs), make_parallel_env(name, kwargs)
    assert fast._mpe is not None
    reference._mpe = None  # the wrapper's own step
    rng = np.random.default_rng(0)
    for episode in range(3):
        a, _ = fast.reset(seed=episode)
        b, _ = reference.reset(seed=episode)
        steps = 0
        while reference.agents:
            for agent in fast.agents:
                np.testing.assert_array_equal(a[agent], b[agent])
            space = {agent: reference.action_space(agent) for agent in reference.agents}
            actions = {agent: (int(rng.integers(s.n)) if isinstance(s, gym.spaces.Discrete)
                               else rng.uniform(s.low, s.high).astype(np.float32)) for agent, s in space.items()}
            a, ra, ta, ua, _ = fast.step(actions)
            b, rb, tb, ub, _ = reference.step(actions)
            assert (ra, ta, ua) == (dict(rb), tb, ub) and fast.agents == reference.agents
            for agent in b:
                np.testing.assert_array_equal(a[agent], b[agent])
            steps += 1
        assert steps == kwargs.get("max_cycles", 25) and not fast.agents
