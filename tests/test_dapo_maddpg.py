"""DAPO on MADDPG: hand numbers for the clips and the shared priorities, each ingredient the identity when off and a
change when on, per-agent clip ranges, exact resume, and plain maddpg refusing DAPO options."""
import math

import numpy as np
import pytest
import torch

from core.config.errors import ConfigError
from core.training.logging import MetricLogger
from core.algo.sampler import Temperature
from dapo_ma import dapo_maddpg as dm
from dapo_ma.config import resolve
from dapo_ma.maddpg import MADDPGTrainer
from dapo_ma.replay import JointTransitions

TINY = dict(env_kwargs={"N": 2, "max_cycles": 25}, total_steps=1600, batch_size=32, learning_starts=200, num_envs=4,
            num_steps=25, progress=False, tensorboard=False, eval_episodes=0)


def test_clipped_q_by_hand():
    """targets std 2 (values 1, 5 per agent: std of (1, 5) = 2.83; here (0, 4): 2.83), eps_V 0.5: the clip range is
    +-1.414; Q moved 3 from the anchor 0 -> clipped to 1.414, the loss takes the larger error."""
    q = torch.tensor([[3.0], [0.5]])
    anchor = torch.zeros(2, 1)
    targets = torch.tensor([[0.0], [4.0]])
    per, frac = dm.clipped_q(q, anchor, targets, torch.tensor([0.5]))
    r = 0.5 * math.sqrt(8.0)  # eps_V x std(0, 4) = 0.5 x 2.828
    assert per[:, 0].tolist() == pytest.approx([max(9.0, r ** 2), max(3.5 ** 2, 3.5 ** 2)])
    assert frac.tolist() == [0.5]


def test_clipped_gumbel_passes_the_gradient_only_inside_the_ratio_range():
    """Two agents, the online logits far from the anchor's for agent 0 only: agent 0's soft-sample components move
    beyond the range and carry no gradient; agent 1's equal the anchor and carry all of it."""
    torch.manual_seed(0)
    logits = torch.tensor([[[4.0, -4.0, 0.0], [0.0, 0.0, 0.0]]], requires_grad=True)
    anchor = torch.zeros(1, 2, 3)
    action, frac = dm.clipped_gumbel(logits, anchor, 1.0, torch.tensor([0.2, 0.2]), torch.tensor([0.2, 0.2]))
    assert torch.equal(action.detach().sum(-1), torch.ones(1, 2))  # one-hot forward, as MADDPG's
    assert frac.tolist()[0] > 0 and frac.tolist()[1] == 0.0
    (action * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad[0, 0].abs().sum() < 1e-12 < logits.grad[0, 1].abs().sum()


def test_clipped_box_by_hand():
    mu = torch.tensor([[[0.9, -0.1]]], requires_grad=True)
    anchor = torch.zeros(1, 1, 2)
    out, frac = dm.clipped_box(mu, anchor, torch.full((1, 2), 2.0), torch.tensor([0.1]), torch.tensor([0.25]))
    assert out.flatten().tolist() == pytest.approx([0.5, -0.1]) and frac.tolist() == [0.5]  # +0.9 capped at 0.25 x 2
    out.sum().backward()
    assert mu.grad.tolist() == [[[0.0, 1.0]]]


def _batch(n):
    return JointTransitions(torch.arange(n, dtype=torch.float32).view(n, 1, 1).expand(n, 2, 3).clone(),
                            torch.zeros(n, 2, 5), torch.zeros(n, 2), torch.zeros(n, 2, 3),
                            torch.zeros(n, 2, dtype=torch.bool))


def test_shared_priorities_draws_and_importance_weights():
    """New transitions enter at the largest priority; after refreshing, p = softmax((w/max w)/T) and the importance
    weights are 1/(N p_j), through core's sampler."""
    replay = dm.SharedPriorityReplay(8, torch.device("cpu"), Temperature("fixed", 1.0), True, seed=0)
    replay.add(_batch(4))
    assert replay.sampler.window().advantages.tolist() == [1.0] * 4
    replay.update_priorities(torch.tensor([0, 1, 2, 3]), torch.tensor([0.0, 1.0, 2.0, 4.0]))
    replay.add(_batch(2))  # at the max, 4
    w = torch.tensor([0.0, 1.0, 2.0, 4.0, 4.0, 4.0])
    p = torch.softmax(w / 4.0, 0)
    assert torch.allclose(replay.sampler.probabilities(), p)
    batch, idx, weights = replay.sample(5000)
    counts = torch.bincount(idx, minlength=6).float() / 5000
    assert torch.allclose(counts, p, atol=0.02)
    assert torch.allclose(weights, 1.0 / (6 * p[idx]))
    assert torch.equal(batch.obs[:, 0, 0], torch.tensor([0, 1, 2, 3, 0, 1], dtype=torch.float32)[idx])


def _trainer(tmp_path, name, **options):
    (tmp_path / name).mkdir(exist_ok=True)
    cfg = resolve({**TINY, "run_dir": str(tmp_path / name), **options})
    return MADDPGTrainer(cfg, tmp_path / name)


def _params(t):
    return [p.detach().clone() for m in (t.actor, t.critic) for p in m.parameters()]


def _train(t, iterations=8):
    t.train(MetricLogger(t.run_dir, tensorboard=False), max_iterations=iterations)
    return _params(t)


def test_each_ingredient_is_the_identity_when_off_and_a_change_when_on(tmp_path):
    maddpg = _train(_trainer(tmp_path, "a", algo="maddpg"))
    off = _train(_trainer(tmp_path, "b", algo="dapo-maddpg", dynamic_sampling=False, per_agent_clips=False,
                          health_monitors=False))
    assert all(torch.equal(x, y) for x, y in zip(maddpg, off))
    for name, options in (("c", dict(per_agent_clips=False)), ("d", dict(dynamic_sampling=False))):
        changed = _train(_trainer(tmp_path, name, algo="dapo-maddpg", health_monitors=False, **options))
        assert not all(torch.equal(x, y) for x, y in zip(maddpg, changed)), options


def test_per_agent_clips_are_per_agent(tmp_path):
    """Widening one agent's eps_pi changes only that agent's range (as the collapse remedy does)."""
    t = _trainer(tmp_path, "r", algo="dapo-maddpg")
    t.clips.widen_policy(1)
    ranges = t.clips.ranges(0.0, torch.device("cpu"))
    assert ranges.eps_low.tolist() == pytest.approx([0.2, 0.3]) and ranges.eps_v.tolist() == pytest.approx([0.5, 0.5])


def test_dapo_maddpg_resumes_exactly(tmp_path):
    full = _trainer(tmp_path, "full", algo="dapo-maddpg", total_steps=1200)
    full.train(MetricLogger(tmp_path / "full", tensorboard=False))
    first = _trainer(tmp_path, "split", algo="dapo-maddpg", total_steps=1200)
    first.train(MetricLogger(tmp_path / "split", tensorboard=False), max_iterations=5)
    from core.training.checkpoint import load_checkpoint
    state = load_checkpoint(tmp_path / "split" / "checkpoint.pt")
    resumed = MADDPGTrainer(first.cfg, tmp_path / "split", state)
    resumed.train(MetricLogger(tmp_path / "split", resume_step=resumed.global_step, tensorboard=False))
    assert resumed.global_step == full.global_step
    assert all(torch.equal(a, b) for a, b in zip(_params(full), _params(resumed)))
    assert torch.equal(full.replay.sampler.window().advantages, resumed.replay.sampler.window().advantages)


def test_the_clips_anchor_on_the_networks_at_the_start_of_the_iteration(tmp_path):
    """The anchor is a snapshot taken at the start of each iteration (not the Polyak targets): right after it, the
    live networks sit on their anchor and nothing is clipped; after the iteration's gradient steps they have moved."""
    t = _trainer(tmp_path, "i", algo="dapo-maddpg", dynamic_sampling=False)
    assert t.anchor_critic is not t.target_critic and t.anchor_actor is not t.target_actor
    _train(t, iterations=10)
    assert any(not torch.equal(a, b) for a, b in zip(t.anchor_critic.parameters(), t.critic.parameters()))
    t.anchor_actor.load_state_dict(t.actor.state_dict())
    t.anchor_critic.load_state_dict(t.critic.state_dict())
    batch = t.replay.sample(32, t.generator)
    ranges = t.clips.ranges(0.5, torch.device("cpu"))
    _, _, _, diag = t.critic_loss(batch, ranges)
    assert diag["critic_clip_fraction"].tolist() == [0.0, 0.0]
    _, diag = t.actor_loss(batch, ranges)
    assert diag["actor_clip_fraction"].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("flag", [dict(dynamic_sampling=True), dict(per_agent_clips=True), dict(clip_eps=0.1),
                                  dict(temperature_mode="ema"), dict(health_monitors=True)])
def test_plain_maddpg_refuses_dapo_options(flag):
    with pytest.raises(ConfigError, match="has no effect with --algo maddpg"):  # one line naming the option
        resolve({**TINY, "algo": "maddpg", **flag})


def test_continuous_actions_train_and_stay_in_the_box(tmp_path):
    t = _trainer(tmp_path, "c", algo="dapo-maddpg", env_kwargs={"N": 2, "max_cycles": 25, "continuous_actions": True})
    t.train(MetricLogger(tmp_path / "c", tensorboard=False), max_iterations=10)
    obs = torch.as_tensor(t.envs.obs)
    action = t.actor.act(obs, t.agent_id.expand(obs.shape[0], -1), deterministic=False)
    assert bool(((action >= t.actor.low) & (action <= t.actor.high)).all())
    assert np.isfinite(_params(t)[0].numpy()).all()
