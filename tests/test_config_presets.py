"""Resolution: which settings each algorithm gets on each env family (recipe files), that explicit options win,
and that run directories of earlier versions load with the meaning they ran with."""
import dataclasses
from pathlib import Path

import pytest
import yaml

from core.config.parsing import write_yaml_config
from core.config.errors import ConfigError
from core.run.presets import resolve
from core.run.rundir import load_run_config
from core.run.runner import settings_line

ROOT = Path(__file__).resolve().parents[1]


def _r(family="classic", **options):
    return resolve(options, family)


@pytest.mark.parametrize("family, algo, auto_lambda, eps_v_start, eps_v_schedule, dynamic_sampling, log_std_init", [
    ("continuous", "dapo", False, 0.5, "linear", True, 0.0),  # dapo is dapo on every env: the fixed lambda,
    ("classic", "dapo", False, 0.5, "linear", True, 0.0),  # eps_V 0.5 -> 0.3, advantage-weighted draws
    ("atari", "dapo", False, 0.5, "linear", True, 0.0),
    ("continuous", "grpo", True, 0.5, "linear", False, 0.0),  # grpo clips the value with clip_eps; eps_V is unused
    ("continuous", "ppo", False, 0.5, "linear", False, 0.0),  # the baselines keep CleanRL's initial std 1
])
def test_family_and_algorithm_presets(family, algo, auto_lambda, eps_v_start, eps_v_schedule, dynamic_sampling,
                                      log_std_init):
    c = _r(family, algo=algo)
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule, c.dynamic_sampling, c.log_std_init) == (
        auto_lambda, eps_v_start, eps_v_schedule, dynamic_sampling, log_std_init)
    assert c.extensions == {}  # no env family's recipe turns an extension on


DAPO_MUJOCO = ("dapo-mujoco",)  # DAPO's tuned MuJoCo settings: a recipe the user names


def test_explicit_settings_override_the_mujoco_dapo_recipe():
    c = _r("continuous", algo="dapo", recipe=DAPO_MUJOCO)
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule, c.dynamic_sampling, c.log_std_init) == (
        True, 0.2, "constant", False, -1.0)
    assert set(c.extensions) == {"kl_adaptive_lr", "noise_floor"}
    c = _r("continuous", algo="dapo", recipe=DAPO_MUJOCO, auto_lambda=False, eps_v_start=0.5, eps_v_schedule="linear")
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule) == (False, 0.5, "linear")
    c = _r("continuous", algo="dapo", recipe=DAPO_MUJOCO, eps_v_start=0.4)  # one option set, the rest from the recipe
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule, c.dynamic_sampling) == (True, 0.4, "constant", False)
    c = _r("continuous", algo="dapo", recipe=DAPO_MUJOCO, dynamic_sampling=True)  # the draws back on MuJoCo
    assert (c.dynamic_sampling, c.auto_lambda, c.eps_v_start) == (True, True, 0.2)
    assert _r("continuous", algo="dapo", recipe=DAPO_MUJOCO, log_std_init=0.0).log_std_init == 0.0  # CleanRL's noise
    c = _r("continuous", algo="dapo", recipe=DAPO_MUJOCO, extensions={"noise_floor": {"log_std_min": -1.5}})
    assert c.extensions["noise_floor"] == {"log_std_min": -1.5, "relative": True, "anneal": True, "anneal_start": 0.5}
    assert c.extensions["kl_adaptive_lr"] == {"target": 0.05, "max_scale": 1.0}  # the other extension stays
    off = _r("continuous", algo="dapo", recipe=DAPO_MUJOCO, extensions={"noise_floor": None})
    assert "noise_floor" not in off.extensions


def test_recipes_layer_in_order_and_a_recipe_may_name_the_algorithm(tmp_path):
    """--recipe files apply after the presets and before explicit options, in the order given; their 'base' recipes
    apply first; a recipe's algo picks the algorithm's own recipe."""
    (tmp_path / "a.yaml").write_text("description: x\nbase: mujoco\nlr: 1.0e-4\nnum_epochs: 3\n")
    (tmp_path / "b.yaml").write_text("algo: grpo\nnum_epochs: 5\n")
    c = _r("continuous", recipe=(str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")), num_minibatches=16)
    assert (c.algo, c.lr, c.num_epochs, c.num_minibatches, c.log_std_init) == ("grpo", 1e-4, 5, 16, -1.0)
    assert c.auto_lambda and not c.separate_optimizers  # grpo's recipe, chosen by b.yaml
    assert set(c.extensions) == {"kl_adaptive_lr", "noise_floor"}  # from mujoco, the base of a.yaml
    assert c.recipe == (str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"))
    (tmp_path / "loop.yaml").write_text("base: loop\n")
    (tmp_path / "typo.yaml").write_text("lrr: 0.1\n")
    (tmp_path / "bad_type.yaml").write_text("num_epochs: many\n")
    for name, message in (("loop.yaml", "includes itself"), ("typo.yaml", "unknown option 'lrr'; did you mean 'lr'"),
                          ("bad_type.yaml", "'num_epochs' must be int"), ("nope", "unknown recipe 'nope'; shipped")):
        with pytest.raises(ConfigError, match=message):
            _r(recipe=(str(tmp_path / name) if name.endswith(".yaml") else name,))


def test_the_run_start_line_names_the_recipe_choices():
    from core.extensions import build

    class FakeTrainer:  # what the extensions read to describe themselves
        import gymnasium as gym
        action_space = gym.spaces.Box(-1, 1, (3,))

        def __init__(self, cfg):
            import torch
            self.cfg = cfg
            self.actor = type("A", (), {"log_std": torch.nn.Parameter(torch.zeros(3))})()

    cfg = _r("continuous", algo="dapo", env="HalfCheetah-v5", recipe=DAPO_MUJOCO)
    line = settings_line(cfg, build(cfg.extensions, FakeTrainer(cfg)))  # the family read from a HalfCheetah env
    assert line == ("dapo on HalfCheetah-v5 [recipes: continuous, dapo, dapo-mujoco]: GAE lambda auto in [0.9, 0.99]; eps_pi 0.2; eps_V 0.2; "
                    "minibatches uniform (--dynamic-sampling for advantage-weighted draws); "
                    "gradient norm clipped jointly over actor and critic; collapse remedy once 2 windows in a row "
                    "show the drop; initial action log-std -1.0 (std 0.37); policy lr /1.5 after each update with "
                    "approx KL > 0.1, never above schedule; action log-std floored at -1.2 (std 0.30 x each "
                    "action's half-range, falling linearly to 0 from 50% of training to the end)")
    assert settings_line(_r("continuous", algo="dapo", env="HalfCheetah-v5"), family="continuous") == (
        "dapo on HalfCheetah-v5 [recipes: continuous, dapo]: GAE lambda 0.95; eps_pi 0.2; eps_V 0.5 -> 0.3 linear; "
        "minibatches advantage-weighted multinomial draws (T fixed from 1.0)")  # dapo's own settings, as everywhere
    assert settings_line(_r(algo="dapo", clip_eps_high=0.28)) == (
        "dapo on CartPole-v1 [recipes: classic, dapo]: GAE lambda 0.8; eps_pi low 0.2 / high 0.28; eps_V 0.5 -> 0.3 linear; "
        "minibatches advantage-weighted multinomial draws (T fixed from 1.0)")
    assert settings_line(_r(algo="ppo"), family="classic") == "ppo on CartPole-v1 [recipes: classic, ppo]: GAE lambda 0.8"
    assert settings_line(_r(algo="ppo", recipe=("classic",)), family="classic") == (  # a user recipe comes last
        "ppo on CartPole-v1 [recipes: classic, ppo, classic]: GAE lambda 0.8")


def test_joint_grad_clip_follows_the_optimisers_unless_set():
    """PPO/GRPO clip both networks' gradients by one norm (CleanRL), DAPO each network's on its own; the option wins."""
    assert _r("continuous", algo="ppo").joint_grad_clip and _r("continuous", algo="grpo").joint_grad_clip
    assert not _r(algo="dapo").joint_grad_clip
    assert not _r("continuous", algo="dapo").joint_grad_clip  # dapo's own on every env
    assert _r("continuous", algo="dapo", recipe=DAPO_MUJOCO).joint_grad_clip  # the mujoco recipe, under dapo-mujoco
    assert not _r("continuous", algo="dapo", joint_grad_clip=False).joint_grad_clip
    assert settings_line(_r(algo="dapo", joint_grad_clip=True)).endswith(
        "; gradient norm clipped jointly over actor and critic")
    assert settings_line(_r(algo="ppo", joint_grad_clip=False)) == (
        "ppo on CartPole-v1 [recipes: classic, ppo]: GAE lambda 0.8; gradient norm clipped per network")


@pytest.mark.parametrize("options, message", [
    (dict(algo="ppo", critic_lr=1e-3), "--critic-lr has no effect with --algo ppo"),
    (dict(algo="grpo", eps_v_start=0.3), "--eps-v-start has no effect with --algo grpo"),
    (dict(algo="ppo", temperature_mode="ema"), "--temperature-mode has no effect.*needs --dynamic-sampling"),
    (dict(algo="dapo", temperature_decay=0.9), "--temperature-decay has no effect.*decay"),
    (dict(algo="ppo", collapse_window=5), "--collapse-window has no effect.*--health-monitors"),
    (dict(algo="dapo", policy_lr_drop_factor=0.5), "needs --policy-lr-drop-step"),
    (dict(algo="ppo", lambda_min=0.8), "--lambda-min has no effect.*--auto-lambda"),
    (dict(algo="dapo", eps_v_schedule="constant", eps_v_end=0.1), "--eps-v-end has no effect"),
])
def test_options_the_algorithm_would_ignore_are_refused(options, message):
    with pytest.raises(ConfigError, match=message):
        _r(**options)


def test_options_a_recipe_sets_are_not_refused_when_inactive(tmp_path):
    """Only explicit options are checked: a recipe may set options that another algorithm ignores."""
    (tmp_path / "r.yaml").write_text("eps_v_start: 0.3\ntemperature_mode: ema\n")
    assert _r(algo="ppo", recipe=(str(tmp_path / "r.yaml"),)).eps_v_start == 0.3


def _old_config_yaml(tmp_path, record: dict, env: str = "HalfCheetah-v5") -> Path:
    """A run directory whose config.yaml was written by the version before recipes (a recorded config)."""
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"env": env, "seed": 1, "total_steps": 1_000_000,
                                                          "run_dir": str(tmp_path), "progress": False,
                                                          "tensorboard": False, **record}))
    return tmp_path


def _recorded(folder: str, label: str) -> dict:
    return yaml.safe_load((ROOT / "experiments/results" / folder / "variants.yaml").read_text())[label]["config"]


def test_run_directories_of_the_previous_version_load_with_their_meaning(tmp_path):
    """config.yaml files written before recipes and extensions (flat target_kl / log_std_min... options) load as
    today's config of the same meaning: the noise floor and the KL brake become extensions, nothing is re-resolved."""
    today = _r("continuous", algo="dapo", env="HalfCheetah-v5", total_steps=1_000_000, progress=False,
               tensorboard=False, run_dir=str(tmp_path), checkpoint_every_s=120.0, recipe=DAPO_MUJOCO)
    old = load_run_config(_old_config_yaml(tmp_path, _recorded("mujoco_1M", "dapo")))
    assert old == dataclasses.replace(today, recipe=())  # the dapo of then is today's dapo-mujoco recipe
    v1 = load_run_config(_old_config_yaml(tmp_path, _recorded("mujoco_1M", "dapo-v1")))  # no brake, no floor
    assert v1.extensions == {} and v1.dynamic_sampling and v1.eps_v_start == 0.5
    older = {k: v for k, v in _recorded("mujoco_1M", "dapo-v1").items()
             if k not in ("collapse_confirm", "joint_grad_clip", "target_kl", "kl_lr_max_scale", "log_std_min")}
    loaded = load_run_config(_old_config_yaml(tmp_path, older))  # options it predates: the values it ran with
    assert (loaded.collapse_confirm, loaded.joint_grad_clip, loaded.extensions) == (0, False, {})


@pytest.mark.parametrize("field, value", [("ent_below", -1.0), ("ent_per_dim", True), ("log_std_max", -1.0),
                                          ("log_std_min_anneal_end", 0.75), ("critic_hidden_sizes", [256, 256]),
                                          ("value_importance_correction", True)])
def test_a_run_that_used_a_removed_option_is_refused_in_one_line(tmp_path, field, value):
    record = {**_recorded("mujoco_1M", "dapo"), field: value}
    with pytest.raises(ConfigError, match=f"uses --{field.replace('_', '-')}, which was removed.*commit c94a516"):
        load_run_config(_old_config_yaml(tmp_path, record))
    off = {**_recorded("mujoco_1M", "dapo"), field: None}  # at its "off" value it loads
    load_run_config(_old_config_yaml(tmp_path, off))


def test_todays_config_round_trips_through_config_yaml(tmp_path):
    cfg = _r("continuous", algo="dapo", env="Hopper-v5", env_kwargs={"ctrl_cost_weight": 0.01}, run_dir=str(tmp_path))
    (tmp_path / "config.yaml").write_text(write_yaml_config(cfg))
    assert load_run_config(tmp_path) == dataclasses.replace(cfg, recipe=tuple(cfg.recipe))


def test_overlap_on_a_busy_machine_gets_one_line_saying_what_it_measured_there():
    from core.run.runner import overlap_note

    note = overlap_note(True, load=2.3, cores=2)
    assert note.startswith("note: --overlap") and "2.3 on 2 cores" in note and "0.6-1.0x" in note
    assert overlap_note(True, load=1.2, cores=2) is None  # a core to spare
    assert overlap_note(False, load=9.0, cores=2) is None  # not asked for
    assert overlap_note(True, load=3.0, cores=8) is None
