"""Multi-agent mechanics: per-agent clip semantics, shared-buffer sampling, critic inputs, MADDPG maths."""
import copy

import numpy as np
import pytest
import torch

import core.training.update
from core.algo.losses import policy_loss
from core.algo.sampler import Temperature
from dapo_ma.buffer import AgentSampler, MATransitions
from core.algo.schedules import ClipSchedule
from dapo_ma.config import MAConfig, resolve
from dapo_ma.maddpg import MADDPGTrainer, replace_own_action, soft_update
from dapo_ma.networks import MACritic, critic_inputs
from dapo_ma.ppo import OnPolicyMATrainer


def _transitions(adv: torch.Tensor, agent_id: torch.Tensor) -> MATransitions:
    n = adv.shape[0]
    return MATransitions(torch.zeros(n, 2), torch.zeros(n, dtype=torch.long), torch.zeros(n), torch.zeros(n),
                         adv, torch.zeros(n), agent_id, torch.zeros(n, 4))


def test_agent_i_is_clipped_only_with_eps_pi_i():
    """Same ratio 1.25 and positive advantage for every sample: agent 0 (eps 0.1) is clipped and gets no
    gradient, agent 1 (eps 0.3) is not; changing eps_pi[1] leaves agent 0's loss terms unchanged."""
    clips = ClipSchedule(2, 0.2, 0.2, 0.2, True, True, 0.5, 0.3, "linear", per_agent=True)
    clips.pi_scale = torch.tensor([0.5, 1.5])
    ranges = clips.ranges(0.0, torch.device("cpu"))
    assert torch.allclose(ranges.eps_low, torch.tensor([0.1, 0.3]))
    agent_id = torch.tensor([0, 1, 0, 1])
    logp = torch.full((4,), torch.log(torch.tensor(1.25)).item(), requires_grad=True)
    low, high, eps_v = ranges.gather(agent_id)
    assert low.tolist() == pytest.approx([0.1, 0.3, 0.1, 0.3]) and eps_v.tolist() == pytest.approx([0.5] * 4)
    loss, diag = policy_loss(logp, torch.zeros(4), torch.ones(4), low, high)
    loss.backward()
    assert torch.all(logp.grad[agent_id == 0] == 0) and torch.all(logp.grad[agent_id == 1] != 0)
    assert diag["clip_fraction"] == pytest.approx(0.5)


def test_shared_clip_remedy_moves_every_agent_per_agent_remedy_one():
    shared = ClipSchedule(3, 0.2, 0.2, 0.2, True, False, 0.5, 0.3, "linear", per_agent=False)
    own = ClipSchedule(3, 0.2, 0.2, 0.2, True, True, 0.5, 0.3, "linear", per_agent=True)
    for c in (shared, own):
        c.widen_policy(1)
        c.widen_value(2, 1.2)
    assert shared.ranges(0, "cpu").eps_low.tolist() == pytest.approx([0.3, 0.3, 0.3])
    assert own.ranges(0, "cpu").eps_low.tolist() == pytest.approx([0.2, 0.3, 0.2])
    assert own.ranges(1.0, "cpu").eps_v.tolist() == pytest.approx([0.3, 0.3, 0.36])  # scheduled 0.5 -> 0.3
    for c in (shared, own):  # the remedy widens once: a second collapse keeps 1.5 x clip_eps
        c.widen_policy(1)
    assert shared.ranges(0, "cpu").eps_low.tolist() == pytest.approx([0.3, 0.3, 0.3])
    assert own.ranges(0, "cpu").eps_low.tolist() == pytest.approx([0.2, 0.3, 0.2])


def test_trainer_update_gathers_each_samples_own_agent_clip(tmp_path, monkeypatch):
    cfg = resolve(MAConfig(algo="dapo-ma", total_steps=800, num_envs=2, num_steps=25, num_epochs=1,
                           num_minibatches=2, env_kwargs="N=3 max_cycles=25", run_dir=str(tmp_path)))
    t = OnPolicyMATrainer(cfg, tmp_path)
    t.clips.pi_scale = torch.tensor([0.5, 1.0, 2.0])
    seen = []
    real_policy_loss, real_evaluate = core.training.update.policy_loss, t._evaluate

    def spy_evaluate(mb):
        seen.append(mb.agent_id.clone())
        return real_evaluate(mb)

    def spy_policy_loss(logp, logp_old, adv, eps_low, eps_high, weights=None):
        seen.append(eps_low.clone())
        return real_policy_loss(logp, logp_old, adv, eps_low, eps_high, weights)
    monkeypatch.setattr(core.training.update, "policy_loss", spy_policy_loss)
    t._evaluate = spy_evaluate
    t.iterate()
    table = torch.tensor([0.1, 0.2, 0.4])
    assert len(seen) == 4
    for ids, eps in zip(seen[::2], seen[1::2]):
        assert torch.allclose(eps, table[ids])


def test_shared_buffer_sampling_over_all_agents_matches_softmax():
    """One sampler over all agents: the share of draws per agent equals the softmax mass of its transitions."""
    gen = torch.Generator().manual_seed(0)
    adv = torch.cat([torch.randn(300, generator=gen) * 3, torch.randn(300, generator=gen), torch.zeros(300)])
    agent_id = torch.arange(3).repeat_interleave(300)
    sampler = AgentSampler(3, 900, "cpu", Temperature("fixed", 0.25), dynamic=True, seed=1)
    sampler.add(_transitions(adv, agent_id))
    w = adv.abs() / adv.abs().max()
    p = torch.softmax(w / 0.25, 0)
    expected = torch.stack([p[agent_id == i].sum() for i in range(3)])
    assert torch.allclose(sampler.expected_shares().float(), expected, atol=1e-6)
    for _ in range(50):
        for _ in sampler.minibatches(4, 500):
            pass
    sampled = sampler.take_sampled_shares().float()
    assert torch.allclose(sampled, expected, atol=0.01)  # 100k draws: binomial sd ~ 0.0015
    assert sampled[0] > sampled[1] > sampled[2]           # larger advantages draw more of that agent's samples
    assert sampler.draws.sum() == 0                        # counter reset after reading


def test_centralised_critic_sees_the_joint_observation():
    obs = torch.randn(5, 4, 3, 18)  # (T, E, A, D)
    joint = critic_inputs(obs, centralised=True)
    assert joint.shape == (5, 4, 3, 54)
    assert torch.equal(joint[..., 1, :], obs.reshape(5, 4, 54))
    assert critic_inputs(obs, centralised=False).shape == (5, 4, 3, 18)
    for shared in (True, False):
        critic = MACritic(54, 3, (16,), shared)
        assert critic(joint, torch.arange(3).expand(5, 4, 3)).shape == (5, 4, 3)


def test_soft_update_is_polyak_averaging():
    source, target = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    before = copy.deepcopy(target)
    soft_update(target, source, 0.1)
    for t, s, b in zip(target.parameters(), source.parameters(), before.parameters()):
        assert torch.allclose(t, 0.1 * s + 0.9 * b)
    soft_update(target, source, 1.0)
    assert all(torch.equal(t, s) for t, s in zip(target.parameters(), source.parameters()))


def test_maddpg_actor_gradient_reaches_only_its_own_slot():
    buffer_actions = torch.zeros(2, 3, 4)
    policy_actions = torch.rand(2, 3, 4, requires_grad=True)
    mixed = replace_own_action(buffer_actions, policy_actions)  # (B, A, A*K)
    assert mixed.shape == (2, 3, 12)
    mixed[:, 1].sum().backward()  # agent 1's critic input
    grad = policy_actions.grad
    assert grad[:, 1].abs().sum() > 0 and grad[:, 0].abs().sum() == 0 and grad[:, 2].abs().sum() == 0


def test_maddpg_critic_target_math(tmp_path):
    cfg = resolve(MAConfig(algo="maddpg", total_steps=400, env_kwargs="N=2 max_cycles=25", batch_size=8,
                           learning_starts=0, run_dir=str(tmp_path)))
    t = MADDPGTrainer(cfg, tmp_path)
    t.iterate()  # fills the replay and takes gradient steps
    batch = t.replay.sample(8, torch.Generator().manual_seed(0))
    ids = torch.arange(2).expand(8, 2)
    torch.manual_seed(0)
    loss, *_ = t.critic_loss(batch)
    torch.manual_seed(0)
    with torch.no_grad():
        next_act, _ = t.target_actor(batch.next_obs, ids, explore=True)
        q_next = t.target_critic(batch.next_obs, next_act.reshape(8, 1, -1).expand(8, 2, -1), ids)
        y = batch.rewards + cfg.gamma * (1 - batch.terminated.float()) * q_next
        q = t.critic(batch.obs, batch.actions.reshape(8, 1, -1).expand(8, 2, -1), ids)
    assert float(loss.detach()) == pytest.approx(float(((q - y) ** 2).mean()), rel=1e-5)
    assert t.replay.size == 200 and t.actor.act(batch.obs, ids, True).shape == (8, 2)


def test_agent_health_restores_only_the_collapsed_agent_and_reports_its_best():
    """Agent 0 rises 0 -> 100 then falls back to 0 (window 2, drop 0.5: fires); agent 1 stays flat at 0."""
    from core.algo.health import HealthController, HealthLog, HealthRules
    from dapo_ma.health import MESSAGES, restore_agent
    clips = ClipSchedule(2, 0.2, 0.2, 0.2, True, True, 0.5, 0.3, "linear", per_agent=True)
    actor, no_errors = torch.nn.Linear(1, 1), np.full(2, np.nan)
    rules = HealthRules(True, collapse_window=2, collapse_drop=0.5, divergence_window=10, divergence_factor=10.0,
                        min_gain=0.1)
    health = HealthController(2, rules, clips, HealthLog(), lambda: copy.deepcopy(actor.state_dict()),
                              lambda snap, i: restore_agent(actor, snap, i, True), MESSAGES)
    for r in (0.0, 0.0, 100.0, 100.0):
        assert health.watch(0, np.array([[r, 0.0]]), no_errors) == []
    best = actor.weight.detach().clone()
    with torch.no_grad():
        actor.weight.add_(1.0)  # a "bad update" after the best snapshot
    events = [e for r in (0.0, 0.0) for e in health.watch(0, np.array([[r, 0.0]]), no_errors)]
    assert events == [("policy_collapse", "agent 0: recent mean far below best 100.00")]
    assert torch.equal(actor.weight, best)
    assert clips.ranges(0, "cpu").eps_low.tolist() == pytest.approx([0.3, 0.2])


def test_checkpoint_from_before_the_health_controller_resumes(tmp_path):
    """The old per-agent "health" entry (``best_actor`` with ``{}`` for an agent without a snapshot) and "clips"
    entry load into core's controller and clip schedule."""
    cfg = resolve(MAConfig(algo="dapo-ma", total_steps=800, num_envs=2, num_steps=25, num_epochs=1,
                           env_kwargs="N=3 max_cycles=25", run_dir=str(tmp_path)))
    t = OnPolicyMATrainer(cfg, tmp_path)
    s = t.state_dict()
    sd = copy.deepcopy(t.actor.state_dict())
    monitors = t.health.state_dict()
    s["health"] = {"collapse": monitors["collapse"], "divergence": monitors["divergence"],
                   "best_actor": [{}, sd, {}], "critic_lr_scale": 0.25}
    s["clips"] = {"pi_scale": torch.tensor([1.0, 1.5, 1.0]), "v_scale": torch.tensor([1.2, 1.0, 1.0])}
    resumed = OnPolicyMATrainer(cfg, tmp_path, s)
    assert resumed.health.best[0] is None and resumed.health.best[2] is None
    assert all(torch.equal(sd[k], v) for k, v in resumed.health.best[1].items())
    assert resumed.health.critic_lr_scale == 0.25
    ranges = resumed.clip_ranges()
    assert ranges.eps_low.tolist() == pytest.approx([0.2, 0.3, 0.2]) and ranges.eps_v[0] == pytest.approx(0.6)
