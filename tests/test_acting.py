"""NumpyActing (the CPU rollout fast path) against the torch networks it copies."""
import numpy as np
import pytest
import torch

from core.envs.rollout import NumpyActing
from core.algo.networks import CategoricalActor, Critic, GaussianActor, build_networks


def _perturbed(module):
    """Random non-zero weights everywhere (fresh output layers are near zero and would hide mistakes)."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return module


def _act(acting: NumpyActing, obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """NumpyActing works on arrays; the checks compare tensors with the torch networks."""
    return tuple(torch.from_numpy(x) for x in acting.act(obs.numpy()))


def test_gaussian_logp_and_values_match_torch():
    actor, critic = _perturbed(GaussianActor(5, 3, (16, 16))), _perturbed(Critic(5, (16, 16)))
    obs = torch.randn(7, 5)
    acting = NumpyActing(actor, critic, np.random.default_rng(0))
    action, logp, value = _act(acting, obs)
    assert action.shape == (7, 3) and logp.shape == (7,) and value.shape == (7,)
    torch_logp, _ = actor.evaluate(obs, action)
    torch.testing.assert_close(logp, torch_logp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(value, critic(obs), rtol=1e-5, atol=1e-5)


def test_gaussian_samples_follow_the_policy():
    actor, critic = _perturbed(GaussianActor(4, 2, (8,))), _perturbed(Critic(4, (8,)))
    obs = torch.randn(1, 4).expand(20_000, 4).contiguous()
    action, _, _ = _act(NumpyActing(actor, critic, np.random.default_rng(1)), obs)
    with torch.no_grad():
        dist = actor.distribution(obs[:1])
    torch.testing.assert_close(action.mean(0), dist.mean[0], atol=0.05 * float(dist.stddev.max()), rtol=0)
    torch.testing.assert_close(action.std(0), dist.stddev[0], rtol=0.03, atol=0)


def test_categorical_logp_matches_torch_and_frequencies_match_softmax():
    actor, critic = _perturbed(CategoricalActor(6, 4, (16,))), _perturbed(Critic(6, (16,)))
    obs = torch.randn(1, 6).expand(40_000, 6).contiguous()
    action, logp, _ = _act(NumpyActing(actor, critic, np.random.default_rng(2)), obs)
    assert action.dtype == torch.int64
    torch_logp, _ = actor.evaluate(obs, action)
    torch.testing.assert_close(logp, torch_logp, rtol=1e-5, atol=1e-5)
    probs = actor.distribution(obs[:1]).probs[0]
    freq = torch.bincount(action, minlength=4).float() / len(action)
    torch.testing.assert_close(freq, probs, atol=0.01, rtol=0)


def test_same_seed_same_actions():
    actor, critic = GaussianActor(3, 2, (8,)), Critic(3, (8,))
    obs = torch.randn(4, 3)
    a1 = _act(NumpyActing(actor, critic, np.random.default_rng(5)), obs)[0]
    a2 = _act(NumpyActing(actor, critic, np.random.default_rng(5)), obs)[0]
    assert torch.equal(a1, a2)


def test_supports_only_cpu_mlps():
    import gymnasium as gym
    box = gym.spaces.Box(-1, 1, (3,))
    actor, critic = build_networks(gym.spaces.Box(-1, 1, (5,)), box, (8,))
    assert NumpyActing.supports(actor, critic, torch.device("cpu"))
    assert not NumpyActing.supports(actor, critic, torch.device("cuda"))
    cnn_actor, cnn_critic = build_networks(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6), (8,))
    assert not NumpyActing.supports(cnn_actor, cnn_critic, torch.device("cpu"))


@pytest.mark.parametrize("numpy_acting", [True, False])
def test_collector_paths_agree_on_values(numpy_acting):
    """Both paths store the critic's value of each observation and the log-prob of each stored action."""
    from core.envs.backends import make_backend
    from core.envs.rollout import ObsNormalizer, RewardScaler
    from core.envs.rollout import Collector

    envs = make_backend("Pendulum-v1", 2, "sync", 0)
    actor, critic = build_networks(envs.single_observation_space, envs.single_action_space, (8,))
    _perturbed(actor), _perturbed(critic)
    col = Collector(envs, 16, ObsNormalizer((3,), False), RewardScaler(2, 0.99, False), torch.device("cpu"), 0,
                    numpy_acting)
    with torch.no_grad():
        ro, last, _ = col.collect(actor, critic)
        flat_obs = ro.obs.reshape(-1, 3)
        torch.testing.assert_close(ro.values.reshape(-1), critic(flat_obs), rtol=1e-5, atol=1e-5)
        logp, _ = actor.evaluate(flat_obs, ro.actions.reshape(-1, 1))
        torch.testing.assert_close(ro.logp.reshape(-1), logp, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("critic_hidden", [(16, 16), (40, 24), (12,)])
def test_actor_and_critic_in_one_forward_or_two(critic_hidden):
    """Equal depths (widths equal or not) run as one side-by-side/block-diagonal MLP, other depths separately: same
    outputs."""
    actor, critic = _perturbed(GaussianActor(5, 3, (16, 16))), _perturbed(Critic(5, critic_hidden))
    acting = NumpyActing(actor, critic, np.random.default_rng(0))
    assert (acting.fused is not None) == (len(critic_hidden) == 2)
    obs = torch.randn(9, 5)
    action, logp, value = _act(acting, obs)
    torch.testing.assert_close(value, critic(obs), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.from_numpy(acting.value(obs.numpy())), critic(obs), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logp, actor.evaluate(obs, action)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("discrete", [False, True], ids=["gaussian", "categorical"])
def test_the_heads_sampling_log_prob_is_their_update_log_prob(discrete):
    """core.algo.numpy_policy's heads: the log-prob acting stores with each sampled action (from the noise, a hot
    loop) is the one the NumPy update recomputes for it (``log_prob``)."""
    from core.algo.numpy_policy import CategoricalHead, GaussianHead

    rng = np.random.default_rng(3)
    out = rng.standard_normal((50, 4)).astype(np.float32)
    head = CategoricalHead() if discrete else GaussianHead(np.array([0.3, -0.7, 0.0, 1.2], np.float32))
    action, logp = head.sample(out, np.random.default_rng(4))
    recomputed, _ = head.log_prob(out, action)
    np.testing.assert_allclose(logp, recomputed, rtol=1e-5, atol=1e-5)
