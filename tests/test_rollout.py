"""The collector records exactly what the environments returned, and bootstraps truncations."""
import numpy as np
import torch

from core.envs.backends import make_backend
from core.envs.rollout import ObsNormalizer, RewardScaler
from core.envs.make import make_vec_env
from core.algo.networks import CategoricalActor, Critic, GaussianActor
from core.envs.rollout import Collector


def _collector(env_id, num_envs, num_steps, norm=False, backend="sync"):
    envs = make_backend(env_id, num_envs, backend, seed=3)
    d = envs.single_observation_space.shape[0]
    collector = Collector(envs, num_steps, ObsNormalizer((d,), norm), RewardScaler(num_envs, 0.99, norm),
                          torch.device("cpu"), seed=3)
    return collector, envs, d


def test_stored_observations_match_a_replay_of_the_same_actions():
    torch.manual_seed(0)
    collector, envs, d = _collector("CartPole-v1", 3, 100)
    actor, critic = CategoricalActor(d, 2, (16,)), Critic(d, (16,))
    rollout, _, episodes = collector.collect(actor, critic)
    replay = make_vec_env("CartPole-v1", 3)
    obs, _ = replay.reset(seed=3)
    rewards, dones = [], []
    for t in range(100):
        assert np.array_equal(rollout.obs[t].numpy(), obs.astype(np.float32)), f"step {t}"
        obs, r, term, trunc, _ = replay.step(rollout.actions[t].numpy())
        rewards.append(r), dones.append(term | trunc)
    assert np.array_equal(rollout.rewards.numpy(), np.array(rewards, dtype=np.float32))
    assert np.array_equal(rollout.dones.numpy(), np.array(dones))
    assert len(episodes) == int(np.array(dones).sum()) > 0          # CartPole ends often under a random policy
    assert sum(e.length for e in episodes) <= 300


def test_truncation_is_bootstrapped_from_the_final_observation():
    """Pendulum always ends by its 200-step time limit: step 199 is truncated, not terminated, and its
    final value is V(final observation), while the stored next observation is the new episode's."""
    torch.manual_seed(0)
    collector, envs, d = _collector("Pendulum-v1", 2, 201)
    actor, critic = GaussianActor(d, 1, (16,)), Critic(d, (16,))
    rollout, _, episodes = collector.collect(actor, critic)
    assert rollout.dones[199].all() and not rollout.terminated.any()
    assert (rollout.final_values[:199] == 0).all() and (rollout.final_values[199] != 0).all()
    replay = make_vec_env("Pendulum-v1", 2)
    replay.reset(seed=3)
    for t in range(200):
        _, _, _, trunc, info = replay.step(np.clip(rollout.actions[t].numpy(), -2, 2))
    final_obs = torch.as_tensor(np.stack(info["final_obs"]), dtype=torch.float32)
    with torch.no_grad():
        assert torch.allclose(rollout.final_values[199], critic(final_obs))
    assert [e.length for e in episodes] == [200, 200]
