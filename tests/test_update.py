"""The shared PPO-family update (``core.training.update.ppo_update``): where the sampler's weights go.

A sampler whose ``weights_scope`` is "surrogate" (PufferLib's prioritized segments) weights the clipped
surrogate only: on the same draws the value loss and entropy must equal the unweighted run's, the advantage
statistics stay unweighted, and the policy loss is the hand-computed ``-mean(w * min(r A, clip(r) A))``.
One epoch of one minibatch makes the reported losses those of the first (pre-step) evaluation.
Also: which learning rate the critic's optimiser group gets by default.
"""
import math

import torch

from core.algo.sampler import DynamicSampler, Temperature, Transitions
from core.training.update import Evaluation, GradGroups, UpdateSettings, _epoch_minibatches, clip_grad_norms_, ppo_update

N = 16


def _data() -> Transitions:
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(N, 2, generator=g)
    return Transitions(obs=obs, actions=torch.randn(N, generator=g), logp_old=torch.randn(N, generator=g),
                       values_old=torch.randn(N, generator=g), advantages=torch.linspace(-3, 5, N),
                       returns=torch.randn(N, generator=g))


def _sampler(importance_correction: bool, scope: str = "all") -> DynamicSampler:
    sampler = DynamicSampler(N, torch.device("cpu"), Temperature("fixed", 0.2), dynamic=True,
                             importance_correction=importance_correction, seed=7)
    sampler.weights_scope = scope
    sampler.add(_data())
    return sampler


def _run(importance_correction: bool, scope: str = "all") -> dict[str, float]:
    torch.manual_seed(0)
    sampler = _sampler(importance_correction, scope)
    actor, critic = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)

    def evaluate(mb):
        mean = actor(mb.obs).squeeze(-1)
        logp = -0.5 * (mb.actions - mean) ** 2
        return Evaluation(logp=logp, entropy=mean.abs(), values=critic(mb.obs).squeeze(-1))

    opt = torch.optim.SGD(list(actor.parameters()) + list(critic.parameters()), lr=0.1)
    settings = UpdateSettings(num_epochs=1, num_minibatches=1, minibatch_size=N, norm_adv=True, vf_coef=0.5,
                              ent_coef=0.01, max_grad_norm=10.0)
    grads = GradGroups(list(actor.parameters()), list(critic.parameters()), joint=True)
    metrics, ok = ppo_update(sampler, evaluate, opt, grads,
                             lambda mb: (0.2, 0.2, None), settings)
    assert ok
    return metrics


def test_surrogate_scoped_weights_reach_the_surrogate_only():
    unweighted = _run(importance_correction=False)
    weighted = _run(importance_correction=True)
    surrogate = _run(importance_correction=True, scope="surrogate")
    # T=0.2 makes p far from uniform, so weighting must change both losses ...
    assert abs(weighted["train/policy_loss"] - unweighted["train/policy_loss"]) > 1e-3
    assert abs(weighted["train/value_loss"] - unweighted["train/value_loss"]) > 1e-3
    # ... and surrogate-only weighting leaves the value loss and entropy as they were unweighted
    assert surrogate["train/value_loss"] == unweighted["train/value_loss"]
    assert surrogate["train/entropy"] == unweighted["train/entropy"]
    # the policy loss by hand: plain minibatch statistics, then each surrogate times its weight
    torch.manual_seed(0)
    actor = torch.nn.Linear(2, 1)  # the same initial weights as the run's (seed 0, first module built)
    idx, w = next(_sampler(True).minibatches(1, N))
    data = _data()
    adv = data.advantages[idx]
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    with torch.no_grad():
        ratio = (-0.5 * (data.actions[idx] - actor(data.obs[idx]).squeeze(-1)) ** 2 - data.logp_old[idx]).exp()
    by_hand = -(w * torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)).mean()
    assert math.isclose(surrogate["train/policy_loss"], float(by_hand), rel_tol=1e-5)
    assert not math.isclose(surrogate["train/policy_loss"], unweighted["train/policy_loss"], rel_tol=1e-3)


def test_dapo_critic_lr_follows_the_policy_lr_unless_set():
    """The critic's rate defaults to --lr (the env preset's), an explicit --critic-lr wins."""
    from core.run.presets import resolve
    assert resolve(dict(env="HalfCheetah-v5", algo="dapo"), "continuous").critic_lr == 3e-4
    assert resolve(dict(algo="dapo", lr=5e-4), "classic").critic_lr == 5e-4
    assert resolve(dict(algo="dapo", critic_lr=1e-3), "continuous").critic_lr == 1e-3


def _grads(actor_grads, critic_grads, joint):
    def params(grads):
        ps = [torch.nn.Parameter(torch.zeros(len(g) if g is not None else 3)) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = None if g is None else torch.tensor(g)
        return ps
    return GradGroups(params(actor_grads), params(critic_grads), joint)


def test_fused_grad_clip_matches_torch_per_network():
    """Separate: the actor (norm 5) is clipped to 0.5, the critic (norm 0.3) left alone; torch agrees."""
    g = _grads([[3.0, 0.0], [4.0]], [[0.3, 0.0], None], joint=False)
    ref = _grads([[3.0, 0.0], [4.0]], [[0.3, 0.0], None], joint=False)
    for group in (ref.actor, ref.critic):
        torch.nn.utils.clip_grad_norm_(group, 0.5)
    diag = clip_grad_norms_(g, 0.5)
    for p, q in zip(g.actor + g.critic, ref.actor + ref.critic):
        torch.testing.assert_close(p.grad, q.grad)
    torch.testing.assert_close(g.actor[0].grad, torch.tensor([0.3, 0.0]), atol=1e-6, rtol=0)  # 3 * 0.5/5 by hand
    torch.testing.assert_close(g.critic[0].grad, torch.tensor([0.3, 0.0]))
    assert g.critic[1].grad is None
    torch.testing.assert_close(diag, torch.tensor([5.0, 0.3, 0.1]))  # pre-clip norms, actor scale 0.5/5


def test_joint_grad_clip_scales_both_networks_by_the_total_norm():
    """Joint: ||g|| = sqrt(3^2 + 4^2 + 12^2) = 13, so both gradients are multiplied by 0.5/13, and the
    small actor gradient (norm 3) is shrunk by the critic's; torch's one-group clip agrees."""
    g = _grads([[3.0]], [[4.0, 12.0]], joint=True)
    ref = _grads([[3.0]], [[4.0, 12.0]], joint=True)
    torch.nn.utils.clip_grad_norm_(ref.actor + ref.critic, 0.5)
    diag = clip_grad_norms_(g, 0.5)
    for p, q in zip(g.actor + g.critic, ref.actor + ref.critic):
        torch.testing.assert_close(p.grad, q.grad)
    torch.testing.assert_close(diag, torch.tensor([3.0, 12.649111, 0.5 / 13]))
    none = _grads([None], [None], joint=True)
    torch.testing.assert_close(clip_grad_norms_(none, 0.5), torch.tensor([0.0, 0.0, 1.0]))  # a no-op, like torch's
    assert none.actor[0].grad is None


def test_epoch_minibatches_gather_the_sampler_draws():
    """Minibatches sliced from the one-per-epoch gather equal per-minibatch indexing of the window."""
    s = DynamicSampler(8, "cpu", Temperature("fixed"), dynamic=True, importance_correction=True, seed=3)
    n = 8
    s.add(Transitions(torch.arange(n, dtype=torch.float32)[:, None], torch.zeros(n, 1), torch.zeros(n),
                      torch.zeros(n), torch.linspace(-1, 2, n), torch.zeros(n)))
    settings = UpdateSettings(1, 3, 4, True, 0.5, 0.0, 0.5)
    expected = list(_clone_sampler(s).minibatches(3, 4))
    got = list(_epoch_minibatches(s, s.window(), settings))
    assert len(got) == 3
    for (mb, w, i), (idx, w_ref) in zip(got, expected):
        torch.testing.assert_close(mb.obs[:, 0], idx.float())  # obs holds each transition's own index
        torch.testing.assert_close(w, w_ref)
        torch.testing.assert_close(i, idx)


def _clone_sampler(s: DynamicSampler) -> DynamicSampler:
    twin = DynamicSampler(s.capacity, "cpu", Temperature("fixed"), s.dynamic, s.importance_correction)
    twin.load_state_dict(s.state_dict())
    return twin


def test_proximal_anchor_by_hand():
    """w = pi_prox / pi_behaviour, capped at 2; lag_kl = mean((w - 1) - log w) over the uncapped w."""
    import math

    from core.training.update import proximal_anchor

    behaviour = torch.log(torch.tensor([0.25, 0.5, 0.1]))
    prox, lag = proximal_anchor(torch.log(torch.tensor([0.5, 0.25, 0.4])), behaviour)  # w = 2, 0.5, 4
    torch.testing.assert_close(prox.weight, torch.tensor([2.0, 0.5, 2.0]))
    torch.testing.assert_close(prox.logp, torch.log(torch.tensor([0.5, 0.25, 0.4])))
    expected = ((1 - math.log(2)) + (-0.5 + math.log(2)) + (3 - math.log(4))) / 3  # 0.3069 + 0.1931 + 1.6137
    assert abs(lag["train/lag_kl"] - expected) < 1e-6


def _update_with(proximal_logp_shift: float, weight: "float | None") -> tuple[dict, list[torch.Tensor]]:
    """One SGD step on a fixed minibatch, anchored on ``logp_old + shift`` with every weight ``weight``."""
    from core.training.update import Proximal

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    data = Transitions(obs=torch.randn(N, 2, generator=g), actions=torch.randn(N, generator=g),
                       logp_old=torch.full((N,), -0.5), values_old=torch.zeros(N),
                       advantages=torch.linspace(-3, 5, N), returns=torch.linspace(-1, 1, N))
    sampler = DynamicSampler(N, torch.device("cpu"), Temperature("fixed"), dynamic=False, importance_correction=False)
    sampler.add(data)
    actor, critic = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)

    def evaluate(mb):
        mean = actor(mb.obs).squeeze(-1)
        return Evaluation(logp=-0.5 * (mb.actions - mean) ** 2, entropy=mean.abs(), values=critic(mb.obs).squeeze(-1))

    opt = torch.optim.SGD(list(actor.parameters()) + list(critic.parameters()), lr=0.1)
    settings = UpdateSettings(num_epochs=1, num_minibatches=1, minibatch_size=N, norm_adv=True, vf_coef=0.5,
                              ent_coef=0.0, max_grad_norm=100.0)
    proximal = None if weight is None else Proximal(data.logp_old + proximal_logp_shift, torch.full((N,), weight))
    grads = GradGroups(list(actor.parameters()), list(critic.parameters()), joint=True)
    metrics, ok = ppo_update(sampler, evaluate, opt, grads,
                             lambda mb: (0.2, 0.2, None), settings, proximal=proximal)
    assert ok
    return metrics, [p.detach().clone() for p in actor.parameters()]


def test_a_proximal_anchor_moves_the_clip_centre_and_weights_the_surrogate():
    plain, w_plain = _update_with(0.0, None)
    same, w_same = _update_with(0.0, 1.0)  # anchored on the behaviour policy itself: no change at all
    assert same == plain and all(torch.equal(a, b) for a, b in zip(w_same, w_plain))
    doubled, w_doubled = _update_with(0.0, 2.0)  # weight 2 on every surrogate: twice the policy loss and step
    assert abs(doubled["train/policy_loss"] - 2 * plain["train/policy_loss"]) < 1e-6
    for a, b, c in zip(w_doubled, w_plain, _update_with(0.0, 0.0)[1]):  # c: weight 0, the policy does not move
        torch.testing.assert_close(a - c, 2 * (b - c))
    shifted, _ = _update_with(-1.0, 1.0)  # ratios measured against logp_old - 1: e times larger
    assert abs(shifted["train/ratio_mean"] - math.e * plain["train/ratio_mean"]) < 1e-4
