"""Atari without EnvPool (core/envs/atari.py): EnvPool's preprocessing and episode accounting on ale-py."""
import importlib.util
import json
import sys

import numpy as np
import pytest
import torch

from core.envs.atari import AtariGame, area_taps, area_weights, resize
from core.envs.backends import EnvPoolBackend, make_backend
from core.run.cli import main

HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None
BACKENDS = ["sync", "async", pytest.param("envpool", marks=pytest.mark.skipif(
    not HAS_ENVPOOL, reason="envpool is not installed: nothing to compare with"))]


@pytest.fixture
def no_envpool(monkeypatch):
    """``import envpool`` fails, as on a machine without it."""
    monkeypatch.setitem(sys.modules, "envpool", None)


def _rollout(backend, env_id="ALE/SpaceInvaders-v5", training=True, steps=1500, num_envs=2, seed=3):
    envs = make_backend(env_id, num_envs, backend, seed, training=training)
    first = np.array(envs.reset(seed))
    rng = np.random.default_rng(seed)
    # copies: sync envs hand out one observation buffer that the next step overwrites
    out = [type(s)(*map(np.array, s)) for s in (envs.step(rng.integers(0, envs.single_action_space.n, num_envs))
                                                for _ in range(steps))]
    envs.close()
    return first, out


def _games(steps, num_envs=2):
    """Per env, the learning episodes (terminations) that each finished game contained."""
    per_game, count = [], np.zeros(num_envs, int)
    for s in steps:
        count += s.valid & (s.terminated | s.truncated)
        for i in np.flatnonzero(s.game_over):
            per_game.append(int(count[i]))
            count[i] = 0
    return per_game


def test_area_resize_averages_blocks_and_keeps_flat_images():
    w = area_weights(210, 84)
    np.testing.assert_allclose(w.sum(1), 1, atol=1e-6)
    np.testing.assert_allclose(w[0, :3], [0.4, 0.4, 0.2], atol=1e-6)  # 2.5 input rows per output row
    flat = np.full((210, 160), 77, np.uint8)
    np.testing.assert_array_equal(resize(flat, area_taps(210, 84), area_taps(160, 84)), 77)
    ramp = np.tile(np.arange(160, dtype=np.uint8), (210, 1))
    out = resize(ramp, area_taps(210, 84), area_taps(160, 84))
    dense = np.rint(area_weights(210, 84) @ ramp.astype(np.float32) @ area_weights(160, 84).T)
    assert np.abs(out.astype(int) - dense).max() <= 1 and (np.diff(out[0].astype(int)) >= 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_clips_rewards_and_counts_lives_within_whole_games(backend):
    """SpaceInvaders pays 5-30 per hit and has 3 lives: learning sees sign(score) and one episode per life
    (3 per finished game), while the score and game over describe the whole game."""
    first, steps = _rollout(backend)
    assert first.shape == (2, 4, 84, 84) and first.dtype == np.uint8 and steps[0].obs.dtype == np.uint8
    valid = np.concatenate([s.valid for s in steps])
    reward, score = np.concatenate([s.reward for s in steps])[valid], np.concatenate([s.score for s in steps])[valid]
    assert np.abs(score).max() > 1
    np.testing.assert_array_equal(reward, np.sign(score))
    games = _games(steps)
    assert len(games) >= 1 and all(n == 3 for n in games), games
    assert all(not s.game_over[i] or s.terminated[i] or s.truncated[i] for s in steps for i in range(2))
    for s in steps:  # a life lost mid-game: the final observation is kept for bootstrapping
        done = s.valid & (s.terminated | s.truncated)
        assert s.final_obs[done].any(axis=(1, 2, 3)).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_evaluation_envs_play_whole_games_with_raw_rewards(backend):
    _, steps = _rollout(backend, training=False)
    for s in steps:
        np.testing.assert_array_equal(s.reward[s.valid], s.score[s.valid])
        np.testing.assert_array_equal((s.terminated | s.truncated)[s.valid], s.game_over[s.valid])
    assert sum(int(s.game_over.sum()) for s in steps) >= 1


@pytest.mark.skipif(not HAS_ENVPOOL, reason="envpool is not installed: nothing to compare with")
@pytest.mark.parametrize("env_id,tolerance", [("ALE/Pong-v5", 0), ("ALE/SpaceInvaders-v5", 1)])
def test_first_frames_match_envpool(env_id, tolerance):
    """Same ALE screen, same grey palette, same area resize: Pong's serve frame is bit-identical; Space
    Invaders' differs by at most one grey level (rounding) where the no-op count did not move anything."""
    ours, theirs = (make_backend(env_id, 1, b, 0, training=False) for b in ("sync", "envpool"))
    assert isinstance(theirs, EnvPoolBackend) and not isinstance(ours, EnvPoolBackend)
    a, b = np.array(ours.reset(0)), np.array(theirs.reset(0))
    assert ours.single_action_space == theirs.single_action_space
    assert np.abs(a.astype(int) - b.astype(int)).max() <= tolerance
    ours.close(), theirs.close()


def test_sync_and_async_give_the_same_games():
    (fa, a), (fb, b) = (_rollout(k, "ALE/Breakout-v5", steps=300) for k in ("sync", "async"))
    np.testing.assert_array_equal(fa, fb)
    for x, y in zip(a, b):
        for name, u, v in zip(x._fields, x, y):
            np.testing.assert_array_equal(u, v, err_msg=name)


def test_seeds_set_the_no_op_starts():
    game = AtariGame("breakout")
    starts = [game.reset(seed=s)[0] for s in (1, 1, 2, 3, 4)]
    np.testing.assert_array_equal(starts[0], starts[1])
    assert any(not np.array_equal(starts[0], s) for s in starts[2:])  # the paddle moved during the no-ops
    assert (starts[0] == starts[0][:1]).all()  # a new game fills the whole stack with its first frame


def test_auto_uses_ale_py_without_envpool_and_errors_stay_one_line(no_envpool):
    from core.config.errors import ConfigError

    envs = make_backend("ALE/Pong-v5", 1, "auto", 0)
    assert not isinstance(envs, EnvPoolBackend) and envs.single_action_space.n == 6
    envs.close()
    with pytest.raises(ConfigError, match="EnvPool does not provide"):
        make_backend("ALE/Pong-v5", 1, "envpool", 0)
    with pytest.raises(ConfigError, match="unknown --env"):
        make_backend("ALE/Pongg-v5", 1, "sync", 0)


@pytest.mark.slow
def test_pong_trains_and_evaluates_without_envpool(no_envpool, tmp_path, capsys):
    """The acceptance command (dapo run --env ALE/Pong-v5 --algo ppo --backend sync) with EnvPool hidden,
    at half its 4096 steps and one evaluation game: a random policy loses Pong 21 to a few points."""
    run = tmp_path / "pong"
    assert main(["run", "--env", "ALE/Pong-v5", "--algo", "ppo", "--backend", "sync", "--total-steps", "2048",
                 "--eval-episodes", "1", "--no-progress", "--no-tensorboard", "--run-dir", str(run)]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["total_steps"] == 2048 and -21 <= summary["eval_return_mean"] <= -15
    assert main(["run", "--env", "ALE/Pong-v5", "--algo", "ppo", "--backend", "envpool", "--total-steps", "8",
                 "--run-dir", str(tmp_path / "x")]) == 2
    assert "EnvPool does not provide" in capsys.readouterr().err
    assert torch.load(run / "checkpoint.pt", weights_only=False)["global_step"] == 2048
