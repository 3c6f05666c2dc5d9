"""The actors' written-out log-probabilities and entropies equal torch.distributions'; the input-layer
refit keeps a restored policy the same function of the raw observation."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from core.envs.rollout import ObsNormalizer
from core.algo.networks import CategoricalActor, Critic, GaussianActor, build_networks, input_layer, refit_input_layer


def test_gaussian_sample_and_evaluate_match_the_normal_distribution():
    torch.manual_seed(0)
    actor = GaussianActor(5, 3, (8,))
    with torch.no_grad():
        actor.log_std.copy_(torch.tensor([-0.5, 0.0, 0.7]))
    obs = torch.randn(16, 5)
    action, logp = actor.sample(obs)
    dist = actor.distribution(obs)
    assert torch.allclose(logp, dist.log_prob(action).sum(-1), atol=1e-5)
    logp2, ent = actor.evaluate(obs, action)
    assert torch.allclose(logp2, logp, atol=1e-5)
    assert torch.allclose(ent, dist.entropy().sum(-1), atol=1e-5)


def test_categorical_evaluate_matches_the_distribution():
    torch.manual_seed(0)
    actor = CategoricalActor(4, 3, (8,))
    obs = torch.randn(10, 4)
    action, logp = actor.sample(obs)
    logp2, ent = actor.evaluate(obs, action)
    dist = actor.distribution(obs)
    assert torch.equal(logp, logp2) and torch.allclose(ent, dist.entropy())


def test_refit_input_layer_on_hand_numbers():
    """W = [1, 2], b = 0.5, fitted on raw x (m 0, s 1); now normalised with m (1, 2), s (2, 4).
    Raw x = (3, 6): the old layer gives 3 + 12 + 0.5 = 15.5 on z_f = (3, 6).  The refit layer reads
    z_c = ((3-1)/2, (6-2)/4) = (1, 1) with W' = (1*2, 2*4) = (2, 8), b' = 0.5 + 1*1 + 2*2 = 5.5: 15.5."""
    layer = torch.nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 2.0]]))
        layer.bias.fill_(0.5)
    refit_input_layer(layer, (np.zeros(2), np.ones(2)), (np.array([1.0, 2.0]), np.array([2.0, 4.0])))
    assert layer.weight.tolist() == [[2.0, 8.0]]
    assert layer.bias.tolist() == [5.5]
    assert layer(torch.tensor([[1.0, 1.0]])).item() == 15.5


def test_refit_input_layer_keeps_the_policy_a_function_of_the_raw_observation():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    actor = GaussianActor(5, 2, [16, 16])
    fitted, current = ObsNormalizer((5,), True), ObsNormalizer((5,), True)
    fitted.update(rng.normal(1.0, 3.0, (500, 5)))
    current.load_state_dict(fitted.state_dict())
    current.update(rng.normal(-2.0, 0.5, (800, 5)))  # the statistics drift while the policy is away
    raw = rng.normal(0.0, 2.0, (64, 5))
    before = actor.mode(torch.as_tensor(fitted(raw)))
    assert not torch.allclose(actor.mode(torch.as_tensor(current(raw))), before, atol=1e-3)  # drift matters
    refit_input_layer(input_layer(actor), ObsNormalizer.mean_std(fitted.state_dict()),
                      ObsNormalizer.mean_std(current.state_dict()))
    assert torch.allclose(actor.mode(torch.as_tensor(current(raw))), before, atol=1e-5)
    with pytest.raises(ValueError, match="do not match"):
        refit_input_layer(input_layer(actor), (np.zeros(3), np.ones(3)), (np.zeros(3), np.ones(3)))


def test_gaussian_log_std_init_sets_the_initial_action_noise():
    """log_std_init -1: every dimension starts at std e^-1 = 0.368 (the sample std of 20000 draws agrees to 2%)."""
    torch.manual_seed(0)
    actor = GaussianActor(5, 3, (8,), log_std_init=-1.0)
    assert torch.equal(actor.log_std.detach(), torch.full((3,), -1.0))
    obs = torch.zeros(20000, 5)
    action, _ = actor.sample(obs)
    noise_std = (action - actor.mode(obs)).std(0)
    assert torch.allclose(noise_std, torch.full((3,), math.exp(-1.0)), rtol=0.02)


@pytest.mark.parametrize("act_space", [gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4)], ids=["box", "discrete"])
def test_build_networks_draws_the_actor_before_the_critic(act_space):
    """The actor's initial weights are drawn first, then the critic's: changing this order would give every seed
    different initial networks, and committed runs would no longer reproduce."""
    obs_space = gym.spaces.Box(-1, 1, (5,))
    torch.manual_seed(0)
    actor, critic = build_networks(obs_space, act_space, (16, 16))
    torch.manual_seed(0)
    box = isinstance(act_space, gym.spaces.Box)
    first = GaussianActor(5, 3, (16, 16)) if box else CategoricalActor(5, 4, (16, 16))
    then = Critic(5, (16, 16))
    for net, twin in ((actor, first), (critic, then)):
        assert all(torch.equal(p, q) for p, q in zip(net.state_dict().values(), twin.state_dict().values()))
