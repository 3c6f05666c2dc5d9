"""The shared PPO-family update (``core.update.ppo_update``): where the sampler's importance weights go.

With ``policy_weights=False`` (``--value-importance-correction``) the weights reach the value loss only:
on the same draws the policy loss must equal the unweighted one and the value loss the weighted one.
One epoch of one minibatch makes the reported losses those of the first (pre-step) evaluation.
Also: which learning rate the critic's optimiser group gets by default.
"""
import torch

from core.sampler import DynamicSampler, Temperature, Transitions
from core.update import Evaluation, UpdateSettings, ppo_update

N = 16


def _run(importance_correction: bool, policy_weights: bool) -> dict[str, float]:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(N, 2, generator=g)
    data = Transitions(obs=obs, actions=torch.randn(N, generator=g), logp_old=torch.randn(N, generator=g),
                       values_old=torch.randn(N, generator=g), advantages=torch.linspace(-3, 5, N),
                       returns=torch.randn(N, generator=g))
    sampler = DynamicSampler(N, torch.device("cpu"), Temperature("fixed", 0.2), dynamic=True,
                             importance_correction=importance_correction, seed=7)
    sampler.add(data)
    actor, critic = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)

    def evaluate(mb):
        mean = actor(mb.obs).squeeze(-1)
        logp = -0.5 * (mb.actions - mean) ** 2
        return Evaluation(logp=logp, entropy=mean.abs(), values=critic(mb.obs).squeeze(-1))

    opt = torch.optim.SGD(list(actor.parameters()) + list(critic.parameters()), lr=0.1)
    settings = UpdateSettings(num_epochs=1, num_minibatches=1, minibatch_size=N, norm_adv=True, vf_coef=0.5,
                              ent_coef=0.01, max_grad_norm=10.0, policy_weights=policy_weights)
    metrics, ok = ppo_update(sampler, evaluate, opt, [list(actor.parameters()) + list(critic.parameters())],
                             lambda mb: (0.2, 0.2, None), settings)
    assert ok
    return metrics


def test_value_only_importance_weights():
    unweighted = _run(importance_correction=False, policy_weights=True)
    weighted = _run(importance_correction=True, policy_weights=True)
    value_only = _run(importance_correction=True, policy_weights=False)
    # T=0.2 makes p far from uniform, so weighting must change both losses ...
    assert abs(weighted["train/policy_loss"] - unweighted["train/policy_loss"]) > 1e-3
    assert abs(weighted["train/value_loss"] - unweighted["train/value_loss"]) > 1e-3
    # ... and value-only weighting takes the policy part from one and the value part from the other.
    assert value_only["train/policy_loss"] == unweighted["train/policy_loss"]
    assert value_only["train/entropy"] == unweighted["train/entropy"]
    assert value_only["train/value_loss"] == weighted["train/value_loss"]


def test_dapo_critic_lr_follows_the_policy_lr_unless_set():
    """The critic's rate defaults to --lr (the env preset's), an explicit --critic-lr wins."""
    from core.config import TrainConfig, resolve
    assert resolve(TrainConfig(env="HalfCheetah-v5", algo="dapo"), "continuous").critic_lr == 3e-4
    assert resolve(TrainConfig(algo="dapo", lr=5e-4), "classic").critic_lr == 5e-4
    assert resolve(TrainConfig(algo="dapo", critic_lr=1e-3), "continuous").critic_lr == 1e-3
