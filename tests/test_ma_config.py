"""dapo_ma configuration: env kwargs parsing, validation messages, CLI flags and YAML round trip."""
import argparse

import pytest

from core.config.flags import add_config_flags
from core.config.parsing import write_yaml_config
from core.config.errors import ConfigError
from dapo_ma.config import MA_ALGOS, MAConfig, parse_env_kwargs, resolve


def test_env_kwargs_parse_literals():
    assert parse_env_kwargs("N=3 max_cycles=25 continuous_actions=True local_ratio=0.5 render_mode=human") == {
        "N": 3, "max_cycles": 25, "continuous_actions": True, "local_ratio": 0.5, "render_mode": "human"}
    assert parse_env_kwargs("continuous_actions=false") == {"continuous_actions": False}
    assert parse_env_kwargs("") == {}


@pytest.mark.parametrize("text,expect", [("N3", "not key=value"), ("N=3 N=4", "twice"), ("=3", "not key=value")])
def test_env_kwargs_syntax_errors(text, expect):
    with pytest.raises(ConfigError, match=expect):
        parse_env_kwargs(text)


@pytest.mark.parametrize("overrides,expect", [
    ({"algo": "mapo"}, "unknown --algo 'mapo'.*did you mean 'mappo'"),
    ({"env": "simple_sprad_v3"}, "unknown --env 'simple_sprad_v3'.*simple_spread_v3"),
    ({"env_kwargs": "N=3 bogus=1"}, "cannot create env"),
    ({"env_kwargs": "N"}, "not key=value"),
    ({"clip_eps": 0.0}, "--clip-eps must be positive"),
    ({"gamma": 1.5}, r"--gamma must be in \(0, 1\]"),
    ({"num_minibatches": 7}, "not divisible by --num-minibatches"),
    ({"window": 10}, "smaller than a minibatch"),
    ({"device": "tpu"}, "--device must be"),
    ({"tau": 0.0}, r"--tau must be in \(0, 1\]"),
])
def test_invalid_configs_name_the_fix(overrides, expect):
    with pytest.raises(ConfigError, match=expect) as e:
        resolve(MAConfig(**overrides))
    assert "\n" not in str(e.value)


def test_presets_make_the_algorithms():
    by_algo = {a: resolve(MAConfig(algo=a)) for a in MA_ALGOS}
    assert not by_algo["ippo"].centralised_critic and by_algo["mappo"].centralised_critic
    assert not by_algo["mappo"].per_agent_clips and by_algo["dapo-ma"].per_agent_clips
    assert by_algo["dapo-ma"].dynamic_sampling and not by_algo["mappo"].dynamic_sampling
    assert by_algo["dapo-ma"].health_monitors and by_algo["dapo-ma"].separate_optimizers
    assert resolve(MAConfig(algo="dapo-ma", per_agent_clips=False)).per_agent_clips is False  # flags win


def test_flags_and_yaml_round_trip(tmp_path):
    parser = argparse.ArgumentParser()
    add_config_flags(parser, MAConfig)
    help_text = parser.format_help()
    for flag in ("--env-kwargs", "--algo", "--parameter-sharing", "--per-agent-clips", "--eps-v-start",
                 "--gumbel-temperature", "--tau"):
        assert flag in help_text
    flags = vars(parser.parse_args(["--env-kwargs", "N=3 max_cycles=25 continuous_actions=True", "--algo", "mappo",
                                    "--no-parameter-sharing", "--hidden-sizes", "32", "32"]))
    cfg = resolve(flags)
    assert cfg.env_kwargs == {"N": 3, "max_cycles": 25, "continuous_actions": True} and not cfg.parameter_sharing
    (tmp_path / "config.yaml").write_text(write_yaml_config(cfg))
    from dapo_ma.runner import load_run_config
    assert load_run_config(tmp_path) == cfg


def test_old_run_directories_with_text_env_kwargs_load(tmp_path):
    """Run directories from before env kwargs were a mapping saved them as 'N=3 max_cycles=25'."""
    import yaml
    from dapo_ma.runner import load_run_config

    cfg = resolve({"algo": "mappo", "env_kwargs": {"N": 2}})
    old = {**yaml.safe_load(write_yaml_config(cfg)), "env_kwargs": "N=2"}
    del old["recipe"], old["progress_every_s"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
    assert load_run_config(tmp_path).env_kwargs == {"N": 2}


@pytest.mark.parametrize("options,expect", [
    ({"algo": "maddpg", "dynamic_sampling": True}, "--dynamic-sampling has no effect with --algo maddpg"),
    ({"algo": "maddpg", "clip_eps": 0.1}, "--clip-eps has no effect with --algo maddpg"),
    ({"algo": "maddpg", "importance_correction": True}, "has no effect with --algo maddpg"),
    ({"algo": "mappo", "tau": 0.05}, "--tau has no effect with --algo mappo.*it is an option of maddpg"),
    ({"algo": "mappo", "temperature_mode": "ema"}, "needs --dynamic-sampling"),
    ({"algo": "mappo", "collapse_window": 5}, "needs --health-monitors"),
])
def test_options_the_algorithm_ignores_are_refused(options, expect):
    with pytest.raises(ConfigError, match=expect):
        resolve(options)
