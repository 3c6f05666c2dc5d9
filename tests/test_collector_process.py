"""The collector in a worker process (``--overlap`` on CPU) must produce what the in-process one does."""
import numpy as np
import pytest
import torch

from core.envs.backends import make_backend
from core.envs.collector import CollectorProcess, WorkerSpec
from core.envs.rollout import ObsNormalizer, RewardScaler
from core.algo.networks import build_networks
from core.envs.rollout import Collector


def _pair(env_id: str, num_envs: int, num_steps: int, seed: int = 3):
    spec = WorkerSpec(env_id, num_envs, "sync", seed, num_steps, norm_obs=True, norm_reward=True, gamma=0.99,
                      hidden_sizes=(16, 16))
    envs = make_backend(env_id, num_envs, "sync", seed)
    torch.manual_seed(0)
    actor, critic = build_networks(envs.single_observation_space, envs.single_action_space, (16, 16))
    local_norm, local_scaler = ObsNormalizer(envs.single_observation_space.shape, True), RewardScaler(num_envs, 0.99, True)
    local = Collector(envs, num_steps, local_norm, local_scaler, torch.device("cpu"), seed, numpy_acting=True)
    remote_norm, remote_scaler = ObsNormalizer(envs.single_observation_space.shape, True), RewardScaler(num_envs, 0.99, True)
    remote = CollectorProcess(spec, remote_norm, remote_scaler)
    return actor, critic, (local, local_norm, local_scaler), (remote, remote_norm, remote_scaler)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_worker_process_collects_what_the_in_process_collector_does(env_id):
    """Two rollouts (Pendulum truncates at 200 steps: the bootstrapped final values are exercised; CartPole
    terminates) with the same seed and weights: every field, episode and normaliser statistic equal."""
    actor, critic, (local, l_norm, l_scaler), (remote, r_norm, r_scaler) = _pair(env_id, 2, 150)
    try:
        assert np.array_equal(l_norm.state_dict()["mean"], r_norm.state_dict()["mean"])  # the reset observations
        for _ in range(2):
            a_roll, a_last, a_eps = local.collect(actor, critic)
            b_roll, b_last, b_eps = remote.submit(actor, critic).result()
            for name, x, y in zip(a_roll._fields, a_roll, b_roll):
                assert torch.equal(x, y), name
            assert torch.equal(a_last, b_last) and a_eps == b_eps
            for key in ("mean", "var", "count"):
                assert np.array_equal(l_norm.state_dict()[key], r_norm.state_dict()[key])
            assert np.array_equal(l_scaler.state_dict()["discounted"], r_scaler.state_dict()["discounted"])
            with torch.no_grad():  # the learner's step between rollouts
                for p in actor.parameters():
                    p.add_(0.01)
        if env_id == "Pendulum-v1":
            assert bool((b_roll.final_values != 0).any())
        a_state, b_state = local.state_dict(), remote.state_dict()
        assert np.array_equal(a_state["raw_obs"], b_state["raw_obs"]) and a_state["rng"] == b_state["rng"]
        assert np.array_equal(a_state["ep_return"], b_state["ep_return"])
    finally:
        remote.close()


def test_worker_state_round_trip_continues_identically():
    """state_dict -> load_state_dict into a fresh worker (as a resumed run does) gives the same next rollout."""
    actor, critic, _, (first, norm, scaler) = _pair("Pendulum-v1", 2, 50)
    second = CollectorProcess(WorkerSpec("Pendulum-v1", 2, "sync", 99, 50, True, True, 0.99, (16, 16)),
                              ObsNormalizer(norm.rms.mean.shape, True), RewardScaler(2, 0.99, True))
    try:
        first.collect(actor, critic)
        second.load_state_dict(first.state_dict())
        second.obs_norm.load_state_dict(norm.state_dict())
        second.reward_scaler.load_state_dict(scaler.state_dict())
        a, b = first.collect(actor, critic), second.collect(actor, critic)
        assert all(torch.equal(x, y) for x, y in zip(a[0], b[0]))
    finally:
        first.close()
        second.close()


def test_worker_errors_are_raised_in_the_learner():
    spec = WorkerSpec("NoSuchEnv-v0", 1, "sync", 0, 8, False, False, 0.99, (8,))
    with pytest.raises(RuntimeError, match="rollout worker failed"):
        CollectorProcess(spec, ObsNormalizer((3,), False), RewardScaler(1, 0.99, False))


def test_a_dead_worker_gives_a_clear_error():
    actor, critic, _, (remote, _, _) = _pair("CartPole-v1", 1, 8)
    remote.process.kill()
    remote.process.join()
    with pytest.raises(RuntimeError, match="rollout worker process died"):
        remote.collect(actor, critic)
    remote.close()


def test_overlap_by_process_trains_exactly_like_overlap_by_thread(tmp_path, small_config, monkeypatch):
    """End to end, with observation and reward normalisation (the statistics travel with every request):
    the worker process and the worker thread give the same weights and the same logged metrics."""
    from core.training.logging import MetricLogger
    from core.training.trainer import Trainer
    from tests.test_trainer import _params, _rows

    def run(name):
        (tmp_path / name).mkdir()
        cfg = small_config(tmp_path / name, env="Pendulum-v1", overlap=True, num_envs=2, num_steps=64,
                           total_steps=6 * 128, norm_obs=True, norm_reward=True)
        t = Trainer(cfg, tmp_path / name)
        t.train(MetricLogger(tmp_path / name, tensorboard=False))
        return t

    process = run("process")
    assert isinstance(process.rollouts.collector, CollectorProcess)
    monkeypatch.setattr(CollectorProcess, "supports", staticmethod(lambda *args: False))
    thread = run("thread")
    assert isinstance(thread.rollouts.collector, Collector) and thread.rollouts.executor is not None
    assert all(torch.equal(a, b) for a, b in zip(_params(process), _params(thread)))
    assert _rows(tmp_path / "process" / "metrics.csv") == _rows(tmp_path / "thread" / "metrics.csv")
    process.rollouts.collector.close()
