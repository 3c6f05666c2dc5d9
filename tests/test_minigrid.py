"""MiniGrid ids (``core.envs.minigrid``): the flat one-hot view, the env family's recipe, the success flag from the env
through the vector backend and the collector to ``rollout/success_rate``, and (slow) learning an empty room."""
import csv

import numpy as np
import pytest

from core.envs.backends import make_backend
from core.config.errors import ConfigError
from core.envs.make import env_family, make_env

pytest.importorskip("minigrid")

# MiniGrid-Empty-5x5: the agent starts at (1, 1) facing east, the goal is at (3, 3)
FORWARD, RIGHT, LEFT = 2, 1, 0
TO_GOAL = [FORWARD, FORWARD, RIGHT, FORWARD, FORWARD]


def test_minigrid_ids_get_the_flat_one_hot_view_and_their_family():
    env = make_env("MiniGrid-DoorKey-5x5-v0")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (7 * 7 * 20,) and set(np.unique(obs)) <= {0, 1}
    assert obs.reshape(7, 7, 20).sum(axis=2).min() >= 1  # every cell of the view is one-hot in its object slot
    assert env_family(env.observation_space, env.action_space, "MiniGrid-DoorKey-5x5-v0") == "minigrid"


def test_the_minigrid_recipe_is_rl_zoos(tmp_path, small_config):
    cfg = small_config(tmp_path, env="MiniGrid-DoorKey-5x5-v0", algo="ppo", num_envs=None, num_steps=None,
                       num_epochs=None, num_minibatches=None)
    assert (cfg.num_envs, cfg.num_steps, cfg.num_epochs, cfg.num_minibatches, cfg.lr) == (8, 128, 10, 16, 2.5e-4)
    assert cfg.norm_obs and cfg.norm_reward and not cfg.anneal_lr and cfg.ent_coef == 0.0


def test_an_unknown_minigrid_id_names_close_ones():
    with pytest.raises(ConfigError, match="unknown MiniGrid env .*did you mean: .*MiniGrid-DoorKey-5x5-v0"):
        make_env("MiniGrid-DoorKey-5x6-v0")


@pytest.mark.parametrize("actions,success", [(TO_GOAL, 1.0), ([LEFT] * 3, 0.0)], ids=["goal", "time-limit"])
def test_success_reaches_the_backend_step(actions, success):
    backend = make_backend("MiniGrid-Empty-5x5-v0", 1, "sync", env_kwargs={"max_steps": 3} if not success else None)
    backend.reset(seed=0)
    for t, a in enumerate(actions):
        step = backend.step(np.array([a]))
        if t < len(actions) - 1:
            assert not step.game_over[0] and step.success is None
    assert step.game_over[0] and step.success.tolist() == [success]
    assert step.terminated[0] == (success == 1.0) and step.truncated[0] == (success == 0.0)


def test_envs_without_the_flag_report_no_success_rate(tmp_path, small_config):
    from core.training.trainer import Trainer

    t = Trainer(small_config(tmp_path, total_steps=512), tmp_path)  # CartPole: no is_success
    assert "rollout/success_rate" not in t.iterate()


@pytest.mark.slow
def test_dapo_learns_an_empty_room(tmp_path):
    from core.run.cli import main

    run = tmp_path / "r"
    assert main(["run", "--env", "MiniGrid-Empty-5x5-v0", "--algo", "dapo", "--total-steps", "10240", "--seed", "1",
                 "--no-progress", "--no-tensorboard", "--eval-episodes", "0", "--run-dir", str(run)]) == 0
    rows = list(csv.DictReader(open(run / "metrics.csv")))
    late = [float(r["rollout/success_rate"]) for r in rows[-3:]]
    assert min(late) >= 0.9, late  # 0.22-0.5 in the first update
