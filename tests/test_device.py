"""The training arithmetic on ``--device`` (default cpu; ``--device cuda`` in experiments/gpu_check.sh).

Each test computes the same thing on the CPU and on the device from the same inputs and weights and
compares: losses, GAE, the sampler's probabilities and draws, one PPO update, the Atari CNN, the Decision
Transformer's loss and gradients; then short trainer runs of every family must stay finite on the device.
On the CPU the comparisons are trivially equal: there the tests check that the code path runs.
"""
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from core.algo.advantages import gae
from core.algo.losses import policy_loss, value_loss
from dapo_dt.losses import exponential_advantage_weights, weighted_action_loss
from core.algo.networks import build_networks
from core.algo.sampler import DynamicSampler, Temperature, Transitions
from core.training.update import Evaluation, GradGroups, UpdateSettings, ppo_update

TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture(autouse=True)
def exact_fp32():
    """The comparisons want fp32 on the device: cuDNN's convolutions default to TF32 (10-bit mantissa)."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _on(device, *xs):
    return [x.to(device) for x in xs]


def _close(got, ref, **tol):
    torch.testing.assert_close(got.detach().cpu().float(), ref.detach().cpu().float(), **(tol or TOL))


def test_policy_value_and_imitation_losses_match_the_cpu(device):
    M = 4096
    logp_new, logp_old, adv, v_new, v_old, ret = (_randn(M, seed=s) * 0.3 for s in range(6))
    weights = _randn(M, seed=6).abs()
    logits, actions, mask = _randn(8, 30, 6, seed=7), torch.randint(0, 6, (8, 30)), _randn(8, 30, seed=8) > -1

    def losses(d):
        pl, pd = policy_loss(*_on(d, logp_new, logp_old, adv), 0.2, 0.28, weights.to(d))
        vl, vd = value_loss(*_on(d, v_new, v_old, ret), 0.2, weights.to(d))
        al, _ = weighted_action_loss(*_on(d, logits, actions, weights[:240].view(8, 30), mask))
        return [pl, vl, al, exponential_advantage_weights(adv.to(d) * 10, 1.0, 20.0), *pd.values(), *vd.values()]

    for got, ref in zip(losses(device), losses("cpu")):
        _close(got, ref)


def test_gae_matches_the_cpu(device):
    T, N = 128, 8
    rewards, values, nxt = _randn(T, N, seed=1), _randn(T, N, seed=2), _randn(T, N, seed=3)
    dones = _randn(T, N, seed=4) > 1.5
    terminated = dones & (_randn(T, N, seed=5) > 0)
    got = gae(*_on(device, rewards, values, nxt, terminated, dones), 0.99, 0.95)
    ref = gae(rewards, values, nxt, terminated, dones, 0.99, 0.95)
    for g, r in zip(got, ref):
        _close(g, r)


def _transitions(n):
    return Transitions(obs=_randn(n, 3, seed=1), actions=_randn(n, seed=2), logp_old=_randn(n, seed=3) * 0.1,
                       values_old=_randn(n, seed=4), advantages=torch.linspace(-3, 5, n), returns=_randn(n, seed=5))


@pytest.mark.parametrize("resampling", ["multinomial", "systematic", "without-replacement"])
def test_sampler_probabilities_match_and_draws_stay_on_the_device(device, resampling):
    n = 512
    samplers = [DynamicSampler(n, d, Temperature("fixed", 0.3), dynamic=True, importance_correction=True,
                               seed=1, resampling=resampling) for d in (device, torch.device("cpu"))]
    for s in samplers:
        s.add(_transitions(n))
    _close(samplers[0].probabilities(), samplers[1].probabilities())
    p = samplers[1].probabilities()
    counts = torch.zeros(n)
    for idx, w in samplers[0].minibatches(4, 256):
        assert idx.device.type == device.type and w.device.type == device.type and idx.shape == (256,)
        assert 0 <= int(idx.min()) and int(idx.max()) < n
        _close(w, 1.0 / (n * p[idx.cpu()]))
        counts += torch.bincount(idx.cpu(), minlength=n)
    if resampling == "without-replacement":  # 1024 draws of 512: every index twice
        assert (counts == 2).all()
    elif resampling == "systematic":  # every index drawn floor or ceil of its expected count
        assert ((counts - 1024 * p).abs() < 1 + 1e-6).all()
    else:  # multinomial: the top half of p gets its share of the draws (sd ~0.016)
        top = p >= p.median()
        assert abs(counts[top].sum() / 1024 - p[top].sum()) < 0.07


def test_one_ppo_update_matches_the_cpu(device):
    """One epoch over the whole window as one minibatch: the order of the draws does not matter, so the
    CPU and the device take the same gradient step."""
    n = 256

    def run(d):
        torch.manual_seed(0)
        actor, critic = torch.nn.Linear(3, 1).to(d), torch.nn.Linear(3, 1).to(d)
        sampler = DynamicSampler(n, d, Temperature("fixed"), dynamic=False, seed=3)
        sampler.add(_transitions(n))

        def evaluate(mb):
            mean = actor(mb.obs).squeeze(-1)
            return Evaluation(logp=-0.5 * (mb.actions - mean) ** 2, entropy=mean.abs(),
                              values=critic(mb.obs).squeeze(-1))

        opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=0.01)
        settings = UpdateSettings(num_epochs=1, num_minibatches=1, minibatch_size=n, norm_adv=True, vf_coef=0.5,
                                  ent_coef=0.01, max_grad_norm=0.5)
        grads = GradGroups(list(actor.parameters()), list(critic.parameters()), joint=True)
        metrics, ok = ppo_update(sampler, evaluate, opt, grads, lambda mb: (0.2, 0.2, 0.2), settings)
        assert ok
        return metrics, [*actor.parameters(), *critic.parameters()]

    (m_dev, p_dev), (m_cpu, p_cpu) = run(device), run(torch.device("cpu"))
    assert m_dev.keys() == m_cpu.keys()
    for k in m_cpu:
        assert m_dev[k] == pytest.approx(m_cpu[k], rel=1e-4, abs=1e-5), k
    for a, b in zip(p_dev, p_cpu):
        _close(a, b)


def test_atari_cnn_policy_matches_the_cpu_and_runs_in_bf16(device):
    torch.manual_seed(0)
    actor, _ = build_networks(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6), (64,))
    frames = torch.randint(0, 256, (16, 4, 84, 84), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    ref = actor.distribution(frames).logits
    on = actor.to(device)
    _close(on.distribution(frames.to(device)).logits, ref, rtol=1e-3, atol=1e-4)
    on.net[0].bf16 = True
    bf16 = on.distribution(frames.to(device)).logits
    assert bf16.dtype == torch.float32 and torch.isfinite(bf16).all()
    _close(bf16, ref, rtol=0.1, atol=0.05 * ref.abs().max().item())


def test_decision_transformer_loss_and_gradients_match_the_cpu(device):
    from dapo_dt.model import DecisionTransformer, DTModelConfig

    B, K = 4, 8
    cfg = DTModelConfig(n_actions=6, context_len=K, n_layer=2, n_embd=32, dropout=0.0, value_head=True)
    g = torch.Generator().manual_seed(2)
    batch = (torch.randn(B, K, generator=g), torch.randint(0, 256, (B, K, 4, 84, 84), dtype=torch.uint8, generator=g),
             torch.randint(0, 6, (B, K), generator=g), torch.arange(K).repeat(B, 1), torch.ones(B, K, dtype=torch.bool))

    def run(d, bf16=False):
        torch.manual_seed(0)
        model = DecisionTransformer(dataclasses.replace(cfg, bf16=bf16)).to(d)
        rtg, frames, actions, timesteps, mask = _on(d, *batch)
        out = model(rtg, frames, actions, timesteps, mask)
        loss, _ = weighted_action_loss(out.logits, actions, None, mask)
        loss.backward()
        return loss, [p.grad for p in model.parameters() if p.grad is not None]

    (l_dev, g_dev), (l_cpu, g_cpu) = run(device), run(torch.device("cpu"))
    _close(l_dev, l_cpu, rtol=1e-4, atol=1e-5)
    assert len(g_dev) == len(g_cpu) > 10
    for a, b in zip(g_dev, g_cpu):
        _close(a, b, rtol=1e-3, atol=1e-4)
    loss_bf16, grads_bf16 = run(device, bf16=True)
    assert torch.isfinite(loss_bf16) and all(torch.isfinite(x).all() for x in grads_bf16)
    assert abs(loss_bf16.item() - l_cpu.item()) < 0.05 * l_cpu.item()


@pytest.mark.parametrize("algo,env", [("dapo", "CartPole-v1"), ("ppo", "Pendulum-v1")])
def test_trainer_keeps_its_networks_and_rollouts_on_the_device(tmp_path, small_config, device, algo, env):
    from core.training.logging import MetricLogger
    from core.training.trainer import Trainer

    cfg = small_config(tmp_path, algo=algo, env=env, device=str(device), total_steps=512)
    t = Trainer(cfg, tmp_path)
    t.train(MetricLogger(tmp_path, tensorboard=False))
    assert t.global_step == 512 and t.device.type == device.type
    assert all(p.device.type == device.type and torch.isfinite(p).all() for p in t.actor.parameters())


@pytest.mark.parametrize("algo", ["dapo-ma", "maddpg"])
def test_multi_agent_trainers_run_on_the_device(tmp_path, device, algo):
    from dapo_ma.config import MAConfig
    from dapo_ma.runner import run_experiment

    summary = run_experiment(MAConfig(algo=algo, env_kwargs="N=3 max_cycles=25", num_envs=2, num_steps=25,
                                      num_epochs=2, total_steps=300, batch_size=32, learning_starts=100,
                                      device=str(device), progress=False, tensorboard=False, eval_episodes=1,
                                      run_dir=str(tmp_path / algo)))
    assert summary["device"].startswith(device.type) and summary["total_steps"] == 300


def test_lm_losses_and_gradients_match_the_cpu(device):
    """DAPO-LM's token loss: group advantages, clip-higher surrogate, each aggregation, and the gradient."""
    from dapo_lm.losses import aggregate, batch_normaliser, clipped_token_surrogate, group_advantages, response_mask

    rewards = torch.tensor([[1.0, -1.0, -1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    lengths, truncated = torch.tensor([3, 5, 2, 6, 4, 1, 6, 2]), torch.tensor([0, 0, 0, 1, 0, 0, 1, 0]).bool()
    old, new = _randn(8, 6, seed=1) * 0.1 - 1.0, _randn(8, 6, seed=2) * 0.3 - 1.0
    for aggregation in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        results = []
        for d in (torch.device("cpu"), device):
            r, lens, trunc, lo, ln = _on(d, rewards, lengths, truncated, old, new)
            ln = ln.clone().requires_grad_(True)
            adv = group_advantages(r).reshape(-1)
            mask = response_mask(lens, 6, trunc, filter_truncated=True)
            per_token, diag = clipped_token_surrogate(ln, lo, adv, 0.2, 0.28)
            loss = aggregate(per_token, mask, aggregation, batch_normaliser(mask, aggregation, 6))
            loss.backward()
            results.append((loss, ln.grad, diag["clipped_high"]))
        (loss_cpu, grad_cpu, high_cpu), (loss_dev, grad_dev, high_dev) = results
        _close(loss_dev, loss_cpu)
        _close(grad_dev, grad_cpu)
        assert torch.equal(high_dev.cpu(), high_cpu)


def test_lm_trainer_runs_on_the_device(tmp_path, device):
    from dapo_lm.config import resolve
    from dapo_lm.runner import run_experiment

    cfg = resolve({"algo": "dapo-lm", "device": str(device), "total_steps": 16, "warm_start_steps": 2,
                   "prompts_per_batch": 2, "group_size": 4, "n_layer": 1, "n_head": 2, "n_embd": 32,
                   "eval_problems": 4, "progress": False, "tensorboard": False, "run_dir": str(tmp_path / "lm")})
    summary = run_experiment(cfg)
    assert summary["answers_generated"] >= 16 and 0.0 <= summary["heldout_accuracy"] <= 1.0
