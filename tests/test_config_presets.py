"""Preset resolution: which settings each algorithm gets on each env family, and that flags win."""
import pytest

from core.config import TrainConfig, validate
from core.presets import resolve


@pytest.mark.parametrize("family, algo, auto_lambda, eps_v_start, eps_v_schedule, dynamic_sampling, log_std_init", [
    ("continuous", "dapo", True, 0.2, "constant", False, -1.0),  # chosen by the 1M MuJoCo benchmark (issue #4)
    ("classic", "dapo", False, 0.5, "linear", True, 0.0),  # elsewhere the SPEC's fixed lambda, eps_V 0.5 -> 0.3, draws
    ("atari", "dapo", False, 0.5, "linear", True, 0.0),
    ("continuous", "grpo", True, 0.5, "linear", False, 0.0),  # grpo clips the value with clip_eps; eps_V is unused
    ("continuous", "ppo", False, 0.5, "linear", False, 0.0),  # the baselines keep CleanRL's initial std 1
])
def test_family_and_algorithm_presets(family, algo, auto_lambda, eps_v_start, eps_v_schedule, dynamic_sampling,
                                      log_std_init):
    c = resolve(TrainConfig(algo=algo), family)
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule, c.dynamic_sampling, c.log_std_init) == (
        auto_lambda, eps_v_start, eps_v_schedule, dynamic_sampling, log_std_init)


def test_explicit_settings_override_the_mujoco_dapo_preset():
    c = resolve(TrainConfig(algo="dapo", auto_lambda=False, eps_v_start=0.5, eps_v_schedule="linear"), "continuous")
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule) == (False, 0.5, "linear")
    c = resolve(TrainConfig(algo="dapo", eps_v_start=0.4), "continuous")  # one flag set, the rest from the preset
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule, c.dynamic_sampling) == (True, 0.4, "constant", False)
    c = resolve(TrainConfig(algo="dapo", dynamic_sampling=True), "continuous")  # the draws back on MuJoCo
    assert (c.dynamic_sampling, c.auto_lambda, c.eps_v_start) == (True, True, 0.2)
    c = resolve(TrainConfig(algo="dapo", log_std_init=0.0), "continuous")  # CleanRL's initial noise back
    assert (c.log_std_init, c.auto_lambda) == (0.0, True)
    c = resolve(TrainConfig(algo="dapo", log_std_min=-1.5), "continuous")  # a given floor replaces the preset's whole
    assert (c.log_std_min, c.log_std_min_relative, c.log_std_min_anneal, c.log_std_min_anneal_start) == (
        -1.5, False, False, 0.0)
    c = resolve(TrainConfig(algo="dapo", log_std_min=float("-inf")), "continuous")  # no floor
    assert (c.log_std_min, c.log_std_min_relative, c.log_std_min_anneal) == (None, False, False)
    c = resolve(TrainConfig(algo="dapo", log_std_min_anneal_start=0.3), "continuous")  # the preset floor, reshaped
    assert (c.log_std_min, c.log_std_min_relative, c.log_std_min_anneal_start) == (-1.2, True, 0.3)
    assert resolve(TrainConfig(algo="grpo"), "continuous").log_std_min is None  # the baselines keep CleanRL's


def test_the_run_start_line_names_the_preset_choices():
    from core.runner import settings_line
    line = settings_line(resolve(TrainConfig(algo="dapo", env="HalfCheetah-v5"), "continuous"))
    assert line == ("dapo on HalfCheetah-v5: GAE lambda auto in [0.9, 0.99]; eps_pi 0.2; eps_V 0.2; "
                    "minibatches uniform (--dynamic-sampling for advantage-weighted draws); "
                    "gradient norm clipped jointly over actor and critic; collapse remedy once 2 windows in a row "
                    "show the drop; policy lr /1.5 after each update with approx KL > 0.1, never above schedule; "
                    "initial action log-std -1.0 (std 0.37); action log-std floored at -1.2 (std 0.30 x each "
                    "action's half-range, falling linearly to 0 from 50% of training to the end)")
    line = settings_line(resolve(TrainConfig(algo="dapo", env="Hopper-v5", log_std_min_anneal_end=0.75), "continuous"))
    assert line.endswith("(std 0.30 x each action's half-range, falling linearly to 0 from 50% of training to 75%)")
    line = settings_line(resolve(TrainConfig(algo="dapo", clip_eps_high=0.28), "classic"))
    assert line == ("dapo on CartPole-v1: GAE lambda 0.8; eps_pi low 0.2 / high 0.28; eps_V 0.5 -> 0.3 linear; "
                    "minibatches advantage-weighted multinomial draws (T fixed from 1.0)")
    assert settings_line(resolve(TrainConfig(algo="ppo"), "classic")) == "ppo on CartPole-v1: GAE lambda 0.8"
    noisy = TrainConfig(algo="ppo", env="Humanoid-v5", ent_coef=0.01, log_std_min=-1.2, log_std_min_relative=True,
                        log_std_min_anneal=True, log_std_min_anneal_start=0.5)
    assert settings_line(resolve(noisy, "continuous")) == (
        "ppo on Humanoid-v5: GAE lambda 0.95; action log-std floored at -1.2 (std 0.30 x each action's half-range, "
        "falling linearly to 0 from 50% of training to the end); entropy bonus 0.01")
    hinged = TrainConfig(algo="ppo", env="Humanoid-v5", ent_coef=0.005, ent_below=-1.0, log_std_max=0.0)
    assert settings_line(resolve(hinged, "continuous")) == (
        "ppo on Humanoid-v5: GAE lambda 0.95; action log-std capped at 0.0 (std 1.00); entropy bonus 0.005 on action "
        "dims with log-std below -1 + log half-range")
    per_dim = TrainConfig(algo="ppo", env="Humanoid-v5", ent_coef=0.03, ent_per_dim=True)
    assert settings_line(resolve(per_dim, "continuous")) == (
        "ppo on Humanoid-v5: GAE lambda 0.95; entropy bonus 0.03 on the mean entropy per action dim")


def test_joint_grad_clip_follows_the_optimisers_unless_set():
    """PPO/GRPO clip both networks' gradients by one norm (CleanRL), DAPO each network's on its own; the flag wins."""
    assert resolve(TrainConfig(algo="ppo"), "continuous").joint_grad_clip
    assert resolve(TrainConfig(algo="grpo"), "continuous").joint_grad_clip
    assert not resolve(TrainConfig(algo="dapo"), "classic").joint_grad_clip
    assert resolve(TrainConfig(algo="dapo"), "continuous").joint_grad_clip  # chosen by the 1M MuJoCo benchmark
    assert not resolve(TrainConfig(algo="dapo", joint_grad_clip=False), "continuous").joint_grad_clip
    from core.runner import settings_line
    assert settings_line(resolve(TrainConfig(algo="dapo", joint_grad_clip=True), "classic")).endswith(
        "; gradient norm clipped jointly over actor and critic")
    assert settings_line(resolve(TrainConfig(algo="ppo", joint_grad_clip=False), "classic")) == (
        "ppo on CartPole-v1: GAE lambda 0.8; gradient norm clipped per network")


def test_collapse_confirm_preset_and_runs_recorded_before_it(tmp_path):
    """DAPO on MuJoCo confirms a collapse on a second window of fresh episodes, elsewhere it acts on the first; a run
    directory whose config.yaml predates --collapse-confirm / --joint-grad-clip loads with the values it ran with
    (0; per-network clipping with DAPO's two optimisers), not today's presets, so resume and eval reproduce it."""
    import dataclasses

    import yaml

    from core.cli_config import load_run_config, write_yaml_config
    assert resolve(TrainConfig(algo="dapo"), "continuous").collapse_confirm == 1
    assert [resolve(TrainConfig(algo=a), f).collapse_confirm for a, f in
            (("dapo", "classic"), ("dapo", "atari"), ("grpo", "continuous"), ("ppo", "continuous"))] == [0] * 4
    assert resolve(TrainConfig(algo="dapo", collapse_confirm=2), "continuous").collapse_confirm == 2
    today = resolve(TrainConfig(algo="dapo", env="HalfCheetah-v5"), "continuous")
    old = {k: v for k, v in yaml.safe_load(write_yaml_config(today)).items()
           if k not in ("collapse_confirm", "joint_grad_clip")}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
    loaded = resolve(load_run_config(tmp_path), "continuous")
    assert loaded == dataclasses.replace(today, collapse_confirm=0, joint_grad_clip=False)


def test_noise_floor_preset_and_runs_recorded_before_it(tmp_path):
    """DAPO on MuJoCo holds a noise floor; a run directory whose config.yaml predates the floor's options (or saved
    no floor) loads for eval as it ran and resumes without a floor: the preset must not add one."""
    import dataclasses

    import yaml

    from core.cli_config import build_config, load_run_config, write_yaml_config
    today = resolve(TrainConfig(algo="dapo", env="HalfCheetah-v5"), "continuous")
    assert (today.log_std_min, today.log_std_min_anneal_start, today.log_std_min_anneal_end) == (-1.2, 0.5, 1.0)
    no_floor = dataclasses.replace(today, log_std_min=None, log_std_min_anneal=False, log_std_min_anneal_start=0.0,
                                   log_std_min_anneal_end=1.0, log_std_min_relative=False, run_dir=str(tmp_path))
    saved = yaml.safe_load(write_yaml_config(today))
    for old in ({k: v for k, v in saved.items() if not k.startswith("log_std_min")},
                {**saved, **yaml.safe_load(write_yaml_config(no_floor))}):
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
        validate(load_run_config(tmp_path))  # what eval reads
        assert resolve(build_config({}, None, tmp_path), "continuous") == no_floor  # what resume trains


def test_kl_brake_preset_and_runs_recorded_before_it(tmp_path):
    """DAPO on MuJoCo brakes its policy lr on KL > 0.1 (--target-kl 0.05, --kl-lr-max-scale 1); everywhere else the
    KL rule is off (0) with Isaac Gym's cap 10 for whoever turns it on, and --target-kl 0 turns the brake off. A run
    directory whose config.yaml saved target_kl null (off, before the preset existed) or predates the options loads
    with the rule off, so resume and eval reproduce it."""
    import dataclasses

    import yaml

    from core.cli_config import load_run_config, write_yaml_config
    today = resolve(TrainConfig(algo="dapo", env="HalfCheetah-v5"), "continuous")
    assert (today.target_kl, today.kl_lr_max_scale) == (0.05, 1.0)
    assert [(c.target_kl, c.kl_lr_max_scale) for c in (resolve(TrainConfig(algo=a), f) for a, f in
            (("dapo", "classic"), ("dapo", "atari"), ("grpo", "continuous"), ("ppo", "continuous")))] == \
        [(0.0, 10.0)] * 4
    assert resolve(TrainConfig(algo="dapo", target_kl=0.0), "continuous").target_kl == 0.0
    off = dataclasses.replace(today, target_kl=0.0, kl_lr_max_scale=10.0)
    saved = yaml.safe_load(write_yaml_config(today))
    for old in ({**saved, "target_kl": None, "kl_lr_max_scale": 10.0},
                {k: v for k, v in saved.items() if k not in ("target_kl", "kl_lr_max_scale")}):
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
        assert resolve(load_run_config(tmp_path), "continuous") == off
    (tmp_path / "config.yaml").write_text(write_yaml_config(today))
    assert resolve(load_run_config(tmp_path), "continuous") == today


def test_critic_widths_default_to_the_actors_and_runs_recorded_before_them(tmp_path):
    """--critic-hidden-sizes unset takes --hidden-sizes; a run directory saved before the option existed (or with it
    null) reloads with the actor's widths, so resume and eval rebuild the critic it trained."""
    import yaml

    from core.cli_config import load_run_config, write_yaml_config
    assert resolve(TrainConfig(hidden_sizes=(32, 16)), "classic").critic_hidden_sizes == (32, 16)
    wide = resolve(TrainConfig(env="HalfCheetah-v5", critic_hidden_sizes=(256, 256)), "continuous")
    assert wide.hidden_sizes == (64, 64) and wide.critic_hidden_sizes == (256, 256)
    saved = yaml.safe_load(write_yaml_config(resolve(TrainConfig(hidden_sizes=(8,)), "classic")))
    for old in ({**saved, "critic_hidden_sizes": None}, {k: v for k, v in saved.items() if k != "critic_hidden_sizes"}):
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
        assert load_run_config(tmp_path).critic_hidden_sizes == (8,)
    (tmp_path / "config.yaml").write_text(write_yaml_config(wide))
    assert load_run_config(tmp_path).critic_hidden_sizes == (256, 256)
