"""Dict observations (flattened for the MLP) and MultiDiscrete / MultiBinary actions (factorised heads) for ppo, grpo
and dapo: the heads' laws by hand, the env family and its refusals, the NumPy fast paths falling back to torch, the
API's predict on raw dicts, evaluation and resume, and (slow) learning on three small envs made here."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import core
from core.algo.networks import BernoulliActor, CategoricalActor, MultiCategoricalActor, build_networks
from core.config.errors import ConfigError
from core.envs.make import env_family, flatten_observations, make_vec_env
from core.envs.rollout import NumpyActing, to_env_actions

TINY = dict(total_steps=1024, num_envs=4, num_steps=64, num_epochs=2, num_minibatches=2, progress=False,
            tensorboard=False, eval_episodes=2)


class DictCorridor(gym.Env):
    """A corridor of ``size`` cells; the goal is its left or its right end, told by a Discrete entry of a nested Dict
    observation.  Actions left / right; +1 at the goal, -1 at the other end (both end the episode), 0 per step;
    20 steps at most.  Random play scores about 0, a policy that reads the goal 1."""

    def __init__(self, size: int = 5):
        self.size = size
        self.observation_space = spaces.Dict({"agent": spaces.Dict({"pos": spaces.Box(0.0, 1.0, (1,), np.float32)}),
                                              "goal": spaces.Discrete(2)})
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        return {"agent": {"pos": np.array([self.pos / (self.size - 1)], np.float32)}, "goal": self.goal}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.goal, self.steps = self.size // 2, int(self.np_random.integers(2)), 0
        return self._obs(), {}

    def step(self, action):
        self.pos += 1 if int(action) == 1 else -1
        self.steps += 1
        end = self.pos in (0, self.size - 1)
        reward = 0.0 if not end else (1.0 if (self.pos == self.size - 1) == (self.goal == 1) else -1.0)
        return self._obs(), reward, end, self.steps >= 20, {}


class MatchTarget(gym.Env):
    """One-step episodes: the Dict observation holds a target per component (a MultiDiscrete entry, shown one-hot
    to the MLP) and noise; the MultiDiscrete action (its second component counts from 1) scores the fraction of
    components equal to the target.  Random play scores mean(1 / nvec) = 0.26."""

    NVEC, START = np.array([3, 4, 5]), np.array([0, 1, 0])

    def __init__(self):
        self.observation_space = spaces.Dict({"target": spaces.MultiDiscrete(self.NVEC),
                                              "noise": spaces.Box(-1.0, 1.0, (2,), np.float32)})
        self.action_space = spaces.MultiDiscrete(self.NVEC, start=self.START)

    def _obs(self):
        self.target = self.np_random.integers(0, self.NVEC)
        return {"target": self.target, "noise": self.np_random.uniform(-1, 1, 2).astype(np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action)), action
        reward = float(np.mean(np.asarray(action) - self.START == self.target))
        return self._obs(), reward, True, False, {}


class CopyBits(gym.Env):
    """One-step episodes: observe 6 random bits, answer with 6 bits (MultiBinary); the reward is the fraction that
    equal the observed bit next to them (bit i answers bit i+1, cyclically).  Random play scores 0.5."""

    N = 6

    def __init__(self):
        self.observation_space = spaces.Box(0.0, 1.0, (self.N,), np.float32)
        self.action_space = spaces.MultiBinary(self.N)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.bits = self.np_random.integers(0, 2, self.N).astype(np.int8)
        return self.bits.astype(np.float32), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action)), action
        reward = float(np.mean(np.asarray(action) == np.roll(self.bits, -1)))
        self.bits = self.np_random.integers(0, 2, self.N).astype(np.int8)
        return self.bits.astype(np.float32), reward, True, False, {}


ENVS = {"DictCorridor": DictCorridor, "MatchTarget": MatchTarget, "CopyBits": CopyBits}
for _name, _cls in ENVS.items():
    if f"dapo-test/{_name}-v0" not in gym.registry:
        gym.register(id=f"dapo-test/{_name}-v0", entry_point=_cls, disable_env_checker=True)


def _fixed_logits(actor, logits):
    """Make ``actor``'s MLP output ``logits`` whatever the observation (zero last weights, bias = logits)."""
    last = actor.net[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.as_tensor(logits, dtype=torch.float32))


def test_factorised_categorical_log_prob_and_entropy_by_hand():
    actor = MultiCategoricalActor(4, (2, 3), (8,))
    _fixed_logits(actor, [0.0, math.log(3), 0.0, 0.0, math.log(2)])  # p = (1/4, 3/4), (1/4, 1/4, 1/2)
    obs = torch.randn(2, 4)
    logp, entropy = actor.evaluate(obs, torch.tensor([[1, 2], [0, 0]]))
    assert logp.tolist() == pytest.approx([math.log(3 / 4) + math.log(1 / 2), math.log(1 / 4) + math.log(1 / 4)],
                                          abs=1e-6)
    h0 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))  # 0.5623
    h1 = 1.5 * math.log(2)  # -(2 * 1/4 log 1/4 + 1/2 log 1/2)
    assert entropy.tolist() == pytest.approx([h0 + h1] * 2, abs=1e-6)
    assert actor.mode(obs).tolist() == [[1, 2], [1, 2]]
    action, sampled_logp = actor.sample(torch.randn(500, 4))
    assert action.shape == (500, 2) and action.dtype == torch.int64
    assert torch.allclose(sampled_logp, actor.evaluate(obs[:1].expand(500, 4), action)[0])
    assert abs(action[:, 0].float().mean() - 0.75) < 0.07 and abs((action[:, 1] == 2).float().mean() - 0.5) < 0.07


def test_bernoulli_log_prob_and_entropy_by_hand():
    actor = BernoulliActor(3, 2, (8,))
    _fixed_logits(actor, [0.0, math.log(3)])  # p = (1/2, 3/4)
    obs = torch.randn(2, 3)
    logp, entropy = actor.evaluate(obs, torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    assert logp.tolist() == pytest.approx([math.log(1 / 2 * 1 / 4), math.log(1 / 2 * 3 / 4)], abs=1e-6)
    h = math.log(2) - (0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert entropy.tolist() == pytest.approx([h, h], abs=1e-6)
    assert actor.mode(obs).tolist() == [[0.0, 1.0], [0.0, 1.0]]  # logit 0 is not > 0
    action, sampled_logp = actor.sample(torch.randn(500, 3))
    assert set(action.unique().tolist()) <= {0.0, 1.0}
    assert torch.allclose(sampled_logp, actor.evaluate(obs[:1].expand(500, 3), action)[0])
    ref = torch.distributions.Independent(torch.distributions.Bernoulli(logits=torch.tensor([0.0, math.log(3)])), 1)
    assert torch.allclose(sampled_logp, ref.log_prob(action), atol=1e-6)


def test_heads_match_torch_distributions_and_build_from_the_spaces():
    actor, critic = build_networks(spaces.Box(-1, 1, (5,)), spaces.MultiDiscrete([3, 2, 4]), (16,))
    assert isinstance(actor, MultiCategoricalActor) and actor.nvec == (3, 2, 4) and critic.net[0].in_features == 5
    obs = torch.randn(7, 5)
    action, logp = actor.sample(obs)
    logits = actor.net(obs).split((3, 2, 4), -1)
    dists = [torch.distributions.Categorical(logits=x) for x in logits]
    assert torch.allclose(logp, sum(d.log_prob(action[:, k]) for k, d in enumerate(dists)), atol=1e-6)
    assert torch.allclose(actor.evaluate(obs, action)[1], sum(d.entropy() for d in dists), atol=1e-6)
    assert isinstance(build_networks(spaces.Box(-1, 1, (5,)), spaces.MultiBinary(4), (16,))[0], BernoulliActor)
    dict_space = DictCorridor().observation_space
    actor, critic = build_networks(dict_space, spaces.Discrete(2), (16,))
    assert isinstance(actor, CategoricalActor) and critic.net[0].in_features == 3  # pos + one-hot goal


def test_env_family_takes_the_new_spaces_and_refuses_the_rest():
    flat = spaces.Box(-1, 1, (3,))
    assert env_family(DictCorridor().observation_space, spaces.Discrete(2)) == "classic"
    assert env_family(flat, spaces.MultiDiscrete([2, 3])) == "classic"
    assert env_family(flat, spaces.MultiBinary(4)) == "classic"
    assert env_family(MatchTarget().observation_space, spaces.Box(-1, 1, (2,))) == "continuous"
    refused = [
        (spaces.Tuple((flat, flat)), spaces.Discrete(2), "observation space Tuple"),
        (spaces.Dict({"img": spaces.Box(0, 255, (8, 8, 3), np.uint8)}), spaces.Discrete(2), "entry 'img' is an image"),
        (spaces.Dict({"a": spaces.Dict({"g": spaces.Graph(flat, None)})}), spaces.Discrete(2),
         "entry 'a.g' is a Graph"),
        (spaces.Dict({"t": spaces.Tuple((flat,))}), spaces.Discrete(2), "entry 't' is a Tuple"),
        (spaces.Dict({}), spaces.Discrete(2), "has no entries"),
        (flat, spaces.MultiDiscrete([[2, 3], [2, 2]]), "action space MultiDiscrete"),
        (flat, spaces.MultiBinary([2, 2]), "action space MultiBinary"),
        (flat, spaces.Tuple((spaces.Discrete(2),)), "supported: Discrete, MultiDiscrete, MultiBinary"),
    ]
    for obs_space, act_space, message in refused:
        with pytest.raises(ConfigError, match=message) as e:
            env_family(obs_space, act_space, "my-env")
        assert "\n" not in str(e.value)


def test_a_tuple_observation_env_is_refused_in_one_line_from_the_cli(capsys):
    from core.run.cli import main

    gym.register(id="dapo-test/TupleObs-v0", entry_point=lambda: _TupleObs(), disable_env_checker=True)
    assert main(["run", "--env", "dapo-test/TupleObs-v0", "--no-progress", "--no-tensorboard"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "observation space Tuple" in err, err


class _TupleObs(CopyBits):
    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3)))


def test_dict_envs_are_flattened_per_env_final_observations_included():
    envs = make_vec_env("dapo-test/DictCorridor-v0", 2)
    assert isinstance(envs.single_observation_space, spaces.Box) and envs.single_observation_space.shape == (3,)
    assert isinstance(envs.raw_observation_space, spaces.Dict)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (2, 3)
    for _ in range(30):
        obs, _, term, trunc, info = envs.step(np.ones(2, np.int64))
        if (term | trunc).any():
            break
    assert np.stack(info["final_obs"][term | trunc]).shape[1:] == (3,)  # flat, as the critic bootstraps from it
    envs.close()


def test_flatten_observations_single_batched_and_listed():
    space = MatchTarget().observation_space
    o1 = {"target": np.array([2, 0, 4]), "noise": np.array([0.5, -0.5], np.float32)}
    o2 = {"target": np.array([0, 3, 1]), "noise": np.array([0.1, 0.2], np.float32)}
    rows, single = flatten_observations(space, o1)
    assert single and rows.shape == (1, 14) and np.allclose(rows[0], spaces.flatten(space, o1))
    batch = {k: np.stack([o1[k], o2[k]]) for k in o1}
    rows, single = flatten_observations(space, batch)
    assert not single and rows.shape == (2, 14) and np.allclose(rows[1], spaces.flatten(space, o2))
    assert np.array_equal(flatten_observations(space, [o1, o2])[0], rows)
    with pytest.raises(ValueError, match="lacks the entry"):
        flatten_observations(space, {"x": 1})
    with pytest.raises(ValueError, match="does not match"):
        flatten_observations(space, {"noise": o1["noise"]})  # no target entry
    with pytest.raises(ValueError, match="observations are dicts"):
        flatten_observations(space, np.zeros(14))


def test_env_actions_count_from_the_space_start_and_take_its_dtype():
    md = spaces.MultiDiscrete([3, 4], start=[0, 1])
    assert to_env_actions(torch.tensor([[2, 0], [0, 3]]), md).tolist() == [[2, 1], [0, 4]]
    mb = to_env_actions(torch.tensor([[1.0, 0.0, 1.0]]), spaces.MultiBinary(3))
    assert mb.dtype == np.int8 and mb.tolist() == [[1, 0, 1]]


def test_numpy_fast_paths_refuse_the_new_heads_and_torch_runs_them(small_config, tmp_path):
    from core.training.trainer import Trainer
    from core.training.update_backend import TorchUpdate

    for act_space in (spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(3)):
        actor, critic = build_networks(spaces.Box(-1, 1, (4,)), act_space, (8,))
        assert not NumpyActing.supports(actor, critic, torch.device("cpu"))
    cfg = small_config(tmp_path, env="dapo-test/CopyBits-v0", total_steps=512, numpy_update=True, numpy_acting=True)
    assert cfg.numpy_update and cfg.numpy_acting  # asked for, and refused by the heads
    trainer = Trainer(cfg, tmp_path)
    assert isinstance(trainer.updater, TorchUpdate)
    metrics = trainer.iterate()
    assert all(np.isfinite(v) for v in metrics.values() if isinstance(v, float))
    trainer.envs.close()
    # Dict observations with Discrete actions are flat Box observations to the networks: the NumPy paths take them
    cfg = small_config(tmp_path / "d", env="dapo-test/DictCorridor-v0", total_steps=512)
    trainer = Trainer(cfg, tmp_path / "d")
    assert trainer.updater.name == "numpy" and NumpyActing.supports(trainer.actor, trainer.critic, trainer.device)
    trainer.envs.close()


@pytest.mark.parametrize("algo", ["ppo", "grpo", "dapo"])
def test_train_predict_evaluate_resume_on_dict_observations_and_multidiscrete_actions(tmp_path, algo):
    r = core.train(env="dapo-test/MatchTarget-v0", algo=algo, run_dir=str(tmp_path / "r"), **TINY)
    assert np.isfinite(r.summary["final_return_mean"])
    agent = core.load(r.run_dir)
    assert isinstance(agent.observation_space, spaces.Dict)
    env = agent.make_env()
    obs, _ = env.reset(seed=0)
    action = agent.predict(obs)  # a raw dict in, an env action out (second component counts from 1)
    assert action.shape == (3,) and env.action_space.contains(action)
    obs2, *_ = env.step(action)
    batch = agent.predict({k: np.stack([obs[k], obs2[k]]) for k in obs})
    assert batch.shape == (2, 3) and (batch[0] == action).all()
    assert (agent.predict([obs, obs2]) == batch).all()
    assert all(env.action_space.contains(a) for a in agent.predict([obs] * 20, deterministic=False))
    assert len(agent.evaluate(episodes=3).returns) == 3
    more = core.train(resume=r.run_dir, total_steps=2048, progress=False)
    assert more.summary["total_steps"] == 2048


def test_multibinary_runs_predict_and_resume(tmp_path):
    r = core.train(env="dapo-test/CopyBits-v0", algo="dapo", run_dir=str(tmp_path / "r"), **TINY)
    agent = core.load(r.run_dir)
    obs, _ = agent.make_env().reset(seed=1)
    action = agent.predict(obs)
    assert action.dtype == np.int8 and action.shape == (6,) and agent.action_space.contains(action)
    assert agent.predict(np.stack([obs] * 4)).shape == (4, 6)
    assert core.train(resume=r.run_dir, total_steps=2048, progress=False).summary["total_steps"] == 2048
    pytest.importorskip("onnx")
    with pytest.raises(ConfigError, match="cannot export a policy of Box observations and MultiBinary actions"):
        agent.export_onnx(tmp_path / "policy.onnx")
    assert not (tmp_path / "policy.onnx").exists()


def _learns(env, algo, steps, random_score, margin, tmp_path):
    summary = core.train(env=env, algo=algo, total_steps=steps, seed=1, run_dir=str(tmp_path / algo), progress=False,
                         tensorboard=False, eval_episodes=20).summary
    assert summary["eval_return_mean"] >= random_score + margin, summary
    return summary


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "grpo", "dapo"])
def test_dict_corridor_learns_to_read_the_goal(tmp_path, algo):
    _learns("dapo-test/DictCorridor-v0", algo, 8192, 0.0, 0.8, tmp_path)  # random ~0, reading the goal 1


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "grpo", "dapo"])
def test_multidiscrete_learns_to_match_each_component(tmp_path, algo):
    _learns("dapo-test/MatchTarget-v0", algo, 8192, 0.26, 0.5, tmp_path)  # random 0.26, perfect 1


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "grpo", "dapo"])
def test_multibinary_learns_to_copy_the_bits(tmp_path, algo):
    _learns("dapo-test/CopyBits-v0", algo, 8192, 0.5, 0.4, tmp_path)  # random 0.5, perfect 1
