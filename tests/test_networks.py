"""The actors' written-out log-probabilities and entropies equal torch.distributions'."""
import torch

from core.networks import CategoricalActor, GaussianActor


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
