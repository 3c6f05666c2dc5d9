"""Rollout backends share one semantics: episode ends, truncation bootstrapping, episode statistics."""
import numpy as np
import pytest
import torch

from core.envs.backends import make_backend
from core.config.errors import ConfigError
from core.envs.rollout import ObsNormalizer, RewardScaler
from core.training.logging import MetricLogger
from core.algo.networks import CategoricalActor, Critic, GaussianActor
from core.envs.rollout import Collector
from core.training.trainer import Trainer


def _collect(env_id, backend, num_envs, num_steps, actor_cls, act_dim):
    torch.manual_seed(0)
    envs = make_backend(env_id, num_envs, backend, seed=5)
    d = envs.single_observation_space.shape[0]
    collector = Collector(envs, num_steps, ObsNormalizer((d,), False), RewardScaler(num_envs, 0.99, False),
                          torch.device("cpu"), seed=5)
    torch.manual_seed(1)
    actor, critic = actor_cls(d, act_dim, (16,)), Critic(d, (16,))
    out = collector.collect(actor, critic)
    envs.close()
    return out


@pytest.mark.parametrize("env_id,actor_cls,act_dim,steps", [("CartPole-v1", CategoricalActor, 2, 120),
                                                           ("Pendulum-v1", GaussianActor, 1, 210)])
def test_sync_and_async_give_identical_rollouts(env_id, actor_cls, act_dim, steps):
    """Same seeds and policy: the same actions, returns, episode ends and bootstrap values."""
    (a, va, ea), (b, vb, eb) = (_collect(env_id, k, 3, steps, actor_cls, act_dim) for k in ("sync", "async"))
    for name, x, y in zip(a._fields, a, b):
        assert torch.equal(x, y), name
    assert torch.equal(va, vb) and ea == eb and len(ea) > 0


def test_envpool_reset_steps_are_invalid_and_episodes_are_counted_once():
    """EnvPool's next-step autoreset: the step after an episode end is a reset step (marked invalid,
    reward 0, not counted); CartPole pays 1 per step, so every episode's return equals its length."""
    pytest.importorskip("envpool")
    rollout, _, episodes = _collect("CartPole-v1", "envpool", 4, 300, CategoricalActor, 2)
    done, valid = rollout.dones.numpy(), rollout.valid.numpy()
    assert np.array_equal(valid[1:], ~done[:-1])
    assert (rollout.rewards.numpy()[~valid] == 0).all() and (rollout.rewards.numpy()[valid] == 1).all()
    assert episodes and all(e.score == e.length for e in episodes)
    assert sum(e.length for e in episodes) <= int(valid.sum())


def test_envpool_and_gymnasium_agree_on_random_cartpole_statistics():
    """Different simulators' RNGs, same task: random-policy CartPole episode lengths agree in mean."""
    pytest.importorskip("envpool")
    lengths = {}
    for backend in ("sync", "envpool"):
        _, _, episodes = _collect("CartPole-v1", backend, 8, 500, CategoricalActor, 2)
        lengths[backend] = np.mean([e.length for e in episodes])
    assert abs(lengths["sync"] - lengths["envpool"]) < 0.25 * lengths["sync"], lengths


@pytest.mark.parametrize("backend", ["async", "envpool"])
def test_trainer_runs_on_every_backend(tmp_path, small_config, backend):
    if backend == "envpool":
        pytest.importorskip("envpool")
    cfg = small_config(tmp_path, backend=backend, total_steps=768)
    t = Trainer(cfg, tmp_path)
    t.train(MetricLogger(tmp_path, tensorboard=False))
    assert t.global_step == 768 and all(torch.isfinite(p).all() for p in t.actor.parameters())


def test_unknown_backend_or_unsupported_envpool_id():
    with pytest.raises(ConfigError, match="unknown --backend"):
        make_backend("CartPole-v1", 1, "gpu")
    pytest.importorskip("envpool")
    with pytest.raises(ConfigError, match="EnvPool does not provide"):
        make_backend("MountainCarContinuous-v0-nope", 1, "envpool")
