"""dapo_ma configuration: env kwargs parsing, validation messages, CLI flags and YAML round trip."""
import argparse
import dataclasses

import pytest

from core.cli_config import add_config_flags, read_yaml_config, write_yaml_config
from core.config import ConfigError
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
    cfg = resolve(MAConfig(**flags))
    assert cfg.env_kwargs == "N=3 max_cycles=25 continuous_actions=True" and not cfg.parameter_sharing
    path = tmp_path / "config.yaml"
    path.write_text(write_yaml_config(cfg))
    assert MAConfig(**read_yaml_config(path, MAConfig)) == dataclasses.replace(cfg)
