"""Preset resolution: which settings each algorithm gets on each env family, and that flags win."""
import pytest

from core.config import TrainConfig, resolve


@pytest.mark.parametrize("family, algo, auto_lambda, eps_v_start, eps_v_schedule", [
    ("continuous", "dapo", True, 0.2, "constant"),  # chosen by the 1M MuJoCo benchmark (issue #4)
    ("classic", "dapo", False, 0.5, "linear"),      # elsewhere the SPEC's fixed lambda and eps_V 0.5 -> 0.3
    ("atari", "dapo", False, 0.5, "linear"),
    ("continuous", "grpo", True, 0.5, "linear"),    # grpo clips the value with clip_eps; eps_V is unused
    ("continuous", "ppo", False, 0.5, "linear"),
])
def test_family_and_algorithm_presets(family, algo, auto_lambda, eps_v_start, eps_v_schedule):
    c = resolve(TrainConfig(algo=algo), family)
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule) == (auto_lambda, eps_v_start, eps_v_schedule)


def test_explicit_settings_override_the_mujoco_dapo_preset():
    c = resolve(TrainConfig(algo="dapo", auto_lambda=False, eps_v_start=0.5, eps_v_schedule="linear"), "continuous")
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule) == (False, 0.5, "linear")
    c = resolve(TrainConfig(algo="dapo", eps_v_start=0.4), "continuous")  # one flag set, the rest from the preset
    assert (c.auto_lambda, c.eps_v_start, c.eps_v_schedule) == (True, 0.4, "constant")
