"""Atari in the single-agent trainer: EnvPool preprocessing, score vs learning reward, the CNN policy."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from core.envs.backends import make_backend
from core.config.errors import ConfigError
from core.envs.rollout import ObsNormalizer, RewardScaler
from core.envs.make import make_vec_env
from core.run.evaluation import evaluate
from core.algo.networks import CategoricalActor, NatureCNN, build_networks, preferred_cnn_precision
from core.envs.rollout import Collector
from core.run.runner import resolve_for_env


def _random_steps(env_id, training, steps, num_envs=2, seed=3):
    envs = make_backend(env_id, num_envs, "envpool", seed, training=training)
    envs.reset(seed)
    rng = np.random.default_rng(seed)
    out = [envs.step(rng.integers(0, envs.single_action_space.n, num_envs)) for _ in range(steps)]
    envs.close()
    return out


def test_training_envs_clip_rewards_and_end_at_life_loss_while_score_is_the_raw_game():
    """SpaceInvaders pays 5-30 per hit: learning sees sign(score); a life loss terminates the learning
    episode (episodic life) but the reported game goes on until game over."""
    steps = _random_steps("ALE/SpaceInvaders-v5", True, 1500)
    valid = np.concatenate([s.valid for s in steps])
    reward, score = np.concatenate([s.reward for s in steps]), np.concatenate([s.score for s in steps])
    assert np.abs(score[valid]).max() > 1
    np.testing.assert_array_equal(reward[valid], np.sign(score[valid]))
    terminated = sum(int(s.terminated.sum()) for s in steps)
    game_over = sum(int(s.game_over.sum()) for s in steps)
    assert terminated > game_over >= 1  # 3 lives per game
    assert all(not s.game_over[i] or s.terminated[i] or s.truncated[i] for s in steps for i in range(2))


def test_evaluation_envs_play_whole_games_with_raw_rewards():
    steps = _random_steps("ALE/SpaceInvaders-v5", False, 1500)
    for s in steps:
        np.testing.assert_array_equal(s.reward, s.score)
        np.testing.assert_array_equal(s.terminated | s.truncated, s.game_over)
    assert sum(int(s.game_over.sum()) for s in steps) >= 1


def test_collector_keeps_uint8_frames_and_reports_full_game_scores():
    envs = make_backend("ALE/Pong-v5", 2, "envpool", 0)
    obs_space = envs.single_observation_space
    assert obs_space.shape == (4, 84, 84) and obs_space.dtype == np.uint8
    collector = Collector(envs, 64, ObsNormalizer(obs_space.shape, False), RewardScaler(2, 0.99, False),
                          torch.device("cpu"), seed=0)
    actor, critic = build_networks(obs_space, envs.single_action_space, (8,))
    rollout, last_values, episodes = collector.collect(actor, critic)
    assert rollout.obs.dtype == torch.uint8 and rollout.obs.shape == (64, 2, 4, 84, 84)
    assert rollout.logp.shape == (64, 2) and last_values.shape == (2,)
    assert episodes == []  # a Pong game lasts far longer than 64 steps
    envs.close()


def test_nature_cnn_shapes_and_bf16_features_stay_close_to_fp32():
    torch.manual_seed(0)
    cnn = NatureCNN(512)
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    fp32 = cnn(frames)
    cnn.bf16 = True
    bf16 = cnn(frames)
    assert fp32.shape == (3, 512) and bf16.dtype == torch.float32
    assert torch.allclose(fp32, bf16, atol=0.05 * fp32.abs().max().item())


def test_frames_get_one_cnn_shared_by_policy_and_value_heads():
    """The encoder is the actor's (parameters, checkpoint) yet the value loss trains it; no parameter is
    listed twice (one optimiser with actor and critic groups); a joint deepcopy keeps the sharing."""
    import copy

    actor, critic = build_networks(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6), (64,))
    assert isinstance(actor, CategoricalActor) and sum(isinstance(m, NatureCNN) for m in actor.modules()) == 1
    frames = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    assert actor.sample(frames)[0].shape == (5,) and critic(frames).shape == (5,)
    assert not set(map(id, actor.parameters())) & set(map(id, critic.parameters()))
    assert list(dict(critic.named_parameters())) == ["head.weight", "head.bias"]
    critic(frames).sum().backward()
    assert actor.net[0].convs[0].weight.grad.abs().sum() > 0
    a2, c2 = copy.deepcopy((actor, critic))
    with torch.no_grad():
        a2.net[0].fc.bias.add_(1.0)
    assert torch.allclose(c2(frames), c2.head(a2.net[0](frames)).squeeze(-1))
    assert not torch.allclose(c2(frames), critic(frames))


def test_atari_presets_and_errors():
    cfg = resolve_for_env(dict(env="ALE/Pong-v5", algo="dapo"))
    assert (cfg.backend, cfg.precision, cfg.clip_eps, cfg.ent_coef, cfg.num_envs, cfg.num_steps) == \
        ("auto", preferred_cnn_precision(), 0.1, 0.01, 8, 128)  # EnvPool if installed, else core/envs/atari.py
    with pytest.raises(ConfigError, match="--norm-obs does not apply"):
        resolve_for_env(dict(env="ALE/Pong-v5", norm_obs=True))
    assert cfg.eval_deterministic is False
    classic = resolve_for_env(dict(env="CartPole-v1"))
    assert (classic.backend, classic.precision, classic.clip_eps) == ("sync", "fp32", 0.2)
    with pytest.raises(ConfigError, match="Atari ids need the DQN preprocessing"):
        make_vec_env("ALE/Pong-v5", 1)


@pytest.mark.slow
def test_evaluate_plays_whole_pong_games():
    """A random Pong policy loses a whole game 21 to a few points: the score is -21..-15, not -1."""
    torch.manual_seed(0)
    actor, _ = build_networks(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6), (8,))
    returns = evaluate("ALE/Pong-v5", actor, ObsNormalizer((4, 84, 84), False), 1, seed=1,
                       device=torch.device("cpu"), deterministic=False)
    assert len(returns) == 1 and -21 <= returns[0] <= -15
