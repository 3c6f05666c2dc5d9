"""The NumPy update (``core.training.numpy_update``) against the torch update it replaces on the CPU.

Same networks, same sampler draws, same settings: after several epochs of Adam steps the parameters, the
Adam moments and the reported ``train/`` metrics must agree to float32 rounding, for Gaussian and
categorical actors, PPO's joint clipping, GRPO's value clip and DAPO's separate groups with prioritised
draws, importance weights (and ``--resampling weighted``'s weights, with the advantage statistics taken under
them), weights on the surrogate only (PufferLib's prioritized segments, ``core.algo.segment_sampler``), clip-higher
and an entropy bonus.  A wrong sign or a missing term in any hand-derived gradient moves the weights far
outside these tolerances (the last test checks that the comparison can fail).
"""
import copy

import numpy as np
import pytest
import torch

from core.algo.networks import CategoricalActor, Critic, GaussianActor
from core.training.numpy_update import NumpyUpdate
from core.algo.sampler import DynamicSampler, Temperature, Transitions
from core.algo.segment_sampler import SegmentSampler
from core.algo.proximal import PROXIMAL_WEIGHT_CAP, proximal_anchor
from core.training.update import Evaluation, UpdateSettings, grad_groups, ppo_update

N, OBS, ACT = 96, 5, 3


def _data(discrete: bool, seed: int = 0) -> Transitions:
    g = torch.Generator().manual_seed(seed)
    actions = torch.randint(0, ACT, (N,), generator=g) if discrete else torch.randn(N, ACT, generator=g)
    return Transitions(obs=torch.randn(N, OBS, generator=g), actions=actions,
                       logp_old=-3 + 0.5 * torch.randn(N, generator=g), values_old=torch.randn(N, generator=g),
                       advantages=2 * torch.randn(N, generator=g), returns=torch.randn(N, generator=g))


def _setup(dynamic: bool, importance: bool, discrete: bool = False, critic_hidden=(16, 16), resampling="multinomial",
           segments: bool = False):
    torch.manual_seed(0)
    actor = CategoricalActor(OBS, ACT, (16, 16)) if discrete else GaussianActor(OBS, ACT, (16, 16))
    critic = Critic(OBS, critic_hidden)
    opt = torch.optim.Adam([{"params": actor.parameters(), "lr": 3e-3}, {"params": critic.parameters(), "lr": 1e-3}],
                           eps=1e-5, fused=True)
    sampler = DynamicSampler(N, torch.device("cpu"), Temperature("fixed", 0.5), dynamic=dynamic,
                             importance_correction=importance, seed=11, resampling=resampling)
    if segments:  # 4 envs x 24 steps in segments of 8; beta 0.2 + 0.8 * 0.8 * 0.5 = 0.52
        sampler = SegmentSampler(4, N // 4, 8, alpha=0.8, beta0=0.2, device=torch.device("cpu"), seed=11)
        sampler.progress = 0.5
    sampler.add(_data(discrete))
    return actor, critic, opt, sampler


CASES = {  # name: (separate groups, clip ranges, dynamic draws, importance weights, segment sampler, ent_coef,
    #         proximal anchor); "dapo-ent-below" also gives the Gaussian actor an entropy ceiling (--ent-below)
    "ppo": (False, (0.2, 0.2, None), False, False, False, 0.0, False),
    "grpo": (False, (0.2, 0.2, 0.2), False, False, False, 0.0, False),
    "dapo": (True, (0.2, 0.28, 0.4), True, True, False, 0.01, False),
    "puffer-segments": (True, (0.1, 0.1, 0.3), False, False, True, 0.003, False),  # weights on the surrogate only
    "dapo-proximal": (True, (0.2, 0.2, 0.4), True, True, False, 0.01, True),
    "dapo-wide-critic": (True, (0.2, 0.2, 0.2), False, False, False, 0.0, False),  # critic (40, 24), actor (16, 16)
    "dapo-ent-below": (True, (0.2, 0.28, 0.4), True, True, False, 0.05, False),
    "dapo-weighted": (True, (0.2, 0.28, 0.4), True, False, False, 0.01, False),  # --resampling weighted
}
ENTROPY_CEILING = torch.tensor([0.5, -0.5, 0.5])  # log-std starts at 0: the bonus acts on dimensions 0 and 2 only


@pytest.mark.parametrize("discrete", [False, True], ids=["gaussian", "categorical"])
@pytest.mark.parametrize("case", list(CASES))
def test_numpy_update_matches_the_torch_update(case, discrete):
    separate, clips, dynamic, importance, segments, ent_coef, anchored = CASES[case]
    settings = UpdateSettings(num_epochs=4, num_minibatches=3, minibatch_size=32, norm_adv=True, vf_coef=0.5,
                              ent_coef=ent_coef, max_grad_norm=0.5)
    critic_hidden = (40, 24) if case == "dapo-wide-critic" else (16, 16)
    actor, critic, opt, sampler = _setup(dynamic, importance, discrete, critic_hidden,
                                         "weighted" if case == "dapo-weighted" else "multinomial", segments)
    if case == "dapo-ent-below" and not discrete:
        actor.entropy_ceiling = ENTROPY_CEILING
    twin = copy.deepcopy((actor, critic, opt, sampler))  # the same weights and the same draws
    proximal = None
    if anchored:  # a proximal policy 0.3 nats (std) away from the behaviour one: weights spread around 1, some capped
        behaviour = sampler.window().logp_old
        g = torch.Generator().manual_seed(5)
        proximal, _ = proximal_anchor(behaviour + 0.3 * torch.randn(N, generator=g), behaviour)
        assert proximal.weight.max() == PROXIMAL_WEIGHT_CAP and proximal.weight.min() < 0.7

    def evaluate(mb):
        return Evaluation(*actor.evaluate(mb.obs, mb.actions), critic(mb.obs))

    ref, ok = ppo_update(sampler, evaluate, opt, grad_groups(actor, critic, separate), lambda mb: clips, settings,
                         proximal=proximal)
    a2, c2, opt2, sampler2 = twin
    opt2.param_groups[0]["params"], opt2.param_groups[1]["params"] = list(a2.parameters()), list(c2.parameters())
    fast, ok2 = NumpyUpdate(a2, c2, opt2, separate).update(sampler2, clips, settings, proximal)
    assert ok and ok2 and list(fast) == list(ref)
    for k in ref:
        np.testing.assert_allclose(fast[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=k)
    assert ref["train/clip_fraction"] > 0  # the clipped branches were exercised
    for p, q in zip([*actor.parameters(), *critic.parameters()], [*a2.parameters(), *c2.parameters()]):
        assert not torch.equal(p, p.detach() * 0)
        torch.testing.assert_close(q, p, rtol=1e-4, atol=2e-6)
        s, t = opt.state[p], opt2.state[q]
        assert float(s["step"]) == float(t["step"]) == 12
        torch.testing.assert_close(t["exp_avg"], s["exp_avg"], rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize("discrete", [False, True], ids=["gaussian", "categorical"])
def test_the_comparison_detects_a_wrong_gradient(monkeypatch, discrete):
    """Drop the entropy bonus from the gradient: the DAPO case must then fail the same tolerance."""
    import core.training.numpy_update as nu

    settings = UpdateSettings(num_epochs=4, num_minibatches=3, minibatch_size=32, norm_adv=True, vf_coef=0.5,
                              ent_coef=0.05, max_grad_norm=0.5)
    actor, critic, opt, sampler = _setup(True, False, discrete)
    a2, c2, opt2, sampler2 = copy.deepcopy((actor, critic, opt, sampler))
    opt2.param_groups[0]["params"], opt2.param_groups[1]["params"] = list(a2.parameters()), list(c2.parameters())
    ppo_update(sampler, lambda mb: Evaluation(*actor.evaluate(mb.obs, mb.actions), critic(mb.obs)), opt,
               grad_groups(actor, critic, True), lambda mb: (0.2, 0.2, 0.4), settings)
    original = nu.NumpyUpdate._loss_and_grads

    def without_entropy(self, mb, w, clip_ranges, s, lag_w=None, scope="all"):
        return original(self, mb, w, clip_ranges, UpdateSettings(**{**s.__dict__, "ent_coef": 0.0}), lag_w, scope)

    monkeypatch.setattr(nu.NumpyUpdate, "_loss_and_grads", without_entropy)
    nu.NumpyUpdate(a2, c2, opt2, True).update(sampler2, (0.2, 0.2, 0.4), settings)
    with pytest.raises(AssertionError):
        for p, q in zip(actor.parameters(), a2.parameters()):
            torch.testing.assert_close(q, p, rtol=1e-4, atol=2e-6)


def test_supports_only_cpu_tanh_mlps_on_one_process():
    actor, critic = GaussianActor(OBS, ACT, (8,)), Critic(OBS, (8,))
    cpu = torch.device("cpu")
    assert NumpyUpdate.supports(actor, critic, cpu, distributed=False)
    assert NumpyUpdate.supports(CategoricalActor(OBS, 2, (8,)), critic, cpu, distributed=False)
    assert not NumpyUpdate.supports(actor, critic, cpu, distributed=True)
    assert not NumpyUpdate.supports(actor, critic, torch.device("cuda"), distributed=False)
    relu_net = torch.nn.Sequential(torch.nn.Linear(OBS, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    assert not NumpyUpdate.supports(CategoricalActor(OBS, 2, (8,), net=relu_net), critic, cpu, distributed=False)


def test_trainer_takes_the_numpy_path_where_supported_and_matches_torch(tmp_path, small_config):
    """One Pendulum iteration with and without ``--numpy-update``: the same collected data, then the same
    weights up to float32 rounding; --compile keeps the torch path."""
    from core.training.logging import MetricLogger
    from core.training.trainer import Trainer

    trainers = {}
    for fast in (True, False):
        d = tmp_path / str(fast)
        d.mkdir()
        cfg = small_config(d, env="Pendulum-v1", num_envs=2, num_steps=64, num_minibatches=4, total_steps=128,
                           numpy_update=fast)
        trainers[fast] = Trainer(cfg, d)
        assert trainers[fast].updater.name == ("numpy" if fast else "torch")
        trainers[fast].train(MetricLogger(d, tensorboard=False), max_iterations=1)
    for p, q in zip(trainers[True].actor.parameters(), trainers[False].actor.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=2e-6)
    assert Trainer(small_config(tmp_path / "cp"), tmp_path / "cp").updater.name == "numpy"  # CartPole
    assert Trainer(small_config(tmp_path / "c", compile=True), tmp_path / "c").updater.name == "torch"


def test_non_finite_loss_stops_before_the_weights():
    actor, critic, opt, sampler = _setup(False, False)
    sampler.data.returns[:] = float("nan")
    before = [p.detach().clone() for p in [*actor.parameters(), *critic.parameters()]]
    settings = UpdateSettings(num_epochs=2, num_minibatches=3, minibatch_size=32, norm_adv=True, vf_coef=0.5,
                              ent_coef=0.0, max_grad_norm=0.5)
    metrics, finite = NumpyUpdate(actor, critic, opt, True).update(sampler, (0.2, 0.2, None), settings)
    assert not finite and metrics == {}
    assert all(torch.equal(p, q) for p, q in zip([*actor.parameters(), *critic.parameters()], before))


@pytest.mark.parametrize("kernel", [True, False], ids=["torch-fused-kernel", "numpy-rule"])
def test_both_adam_paths_match_the_torch_update(monkeypatch, kernel):
    """Adam runs torch's fused CPU kernel on the flat vectors where torch has it, else the same rule in NumPy: each
    path alone must match the torch update (DAPO's case: two optimiser groups with their own learning rates)."""
    import core.training.numpy_update as nu

    if kernel and not nu.fused_adam():
        pytest.skip("this torch has no fused CPU Adam kernel")
    monkeypatch.setattr(nu, "fused_adam", lambda: kernel)
    for discrete in (False, True):
        test_numpy_update_matches_the_torch_update("dapo", discrete)
