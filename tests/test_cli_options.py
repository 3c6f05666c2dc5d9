"""How `dapo run` reads its options: --ext layering, key=value text, help texts, recipe files and `dapo recipes`,
options the env family would ignore, and docs/options.md against the parser."""
import dataclasses
from pathlib import Path

import pytest

from core import recipes
from core.cli import build_parser, explicit_from_args, main
from core.config import ConfigError, TrainConfig
from core.presets import resolve
from core.registry import plugins

REPO = Path(__file__).resolve().parents[1]
FAMILIES = ("dapo", "mappo", "dapo-dt")  # one algorithm of each family


def _run_parser(algo: str):
    found = plugins()
    return build_parser(found.family_of(algo), found)


def _explicit(argv: list[str]) -> dict:
    args = _run_parser("dapo").parse_args(["run", *argv])
    return explicit_from_args(args, {f.name for f in dataclasses.fields(TrainConfig)} - {"recipe", "extensions"})


def _help(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # wrapping depends on the terminal width


# --- 1. --ext changes the options it names ----------------------------------------------------------------------
def test_a_layer_changes_only_the_extension_options_it_names():
    recipe = {"extensions": {"kl_adaptive_lr": {"target": 0.05, "max_scale": 1.0}, "noise_floor": {"anneal": True}}}
    merged = recipes.merge([recipe, {"extensions": {"kl_adaptive_lr": {"target": 0.02}, "noise_floor": None}}])
    assert merged["extensions"] == {"kl_adaptive_lr": {"target": 0.02, "max_scale": 1.0}, "noise_floor": None}
    again = recipes.merge([merged, {"extensions": {"noise_floor": {"relative": True}}}])  # after null: afresh
    assert again["extensions"]["noise_floor"] == {"relative": True}


@pytest.mark.parametrize("argv,expect", [
    (["--ext", "kl_adaptive_lr", "target=0.02"], {"target": 0.02, "max_scale": 1.0}),  # the recipe's brake stays
    (["--ext", "kl_adaptive_lr", "target=0.02", "--ext", "kl_adaptive_lr", "max_scale=2"], {"target": 0.02,
                                                                                          "max_scale": 2.0}),
    (["--ext", "kl_adaptive_lr", "target=0.02", "--ext", "kl_adaptive_lr", "target=0.03"], {"target": 0.03,
                                                                                           "max_scale": 1.0}),
])
def test_ext_sets_options_of_the_extension_the_dapo_mujoco_recipe_turned_on(argv, expect):
    cfg = resolve({"env": "Pendulum-v1", **_explicit(argv)}, "continuous")
    assert cfg.extensions["kl_adaptive_lr"] == expect
    assert cfg.extensions["noise_floor"]["log_std_min"] == -1.2  # untouched


def test_ext_off_still_removes_an_extension_and_cannot_be_combined_with_options():
    cfg = resolve({"env": "Pendulum-v1", **_explicit(["--ext", "kl_adaptive_lr", "off"])}, "continuous")
    assert "kl_adaptive_lr" not in cfg.extensions and "noise_floor" in cfg.extensions
    with pytest.raises(ConfigError, match="both turned off and given options"):
        _explicit(["--ext", "kl_adaptive_lr", "target=0.1", "--ext", "kl_adaptive_lr", "off"])


# --- 5, 6. recipe files: relative base, recipe: inside a --config file -------------------------------------------
def test_a_relative_base_is_read_next_to_the_recipe_that_names_it(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "sub" / "base1.yaml").write_text("base: [base2.yaml, ../other/base3.yaml]\nlr: 0.01\n")
    (tmp_path / "sub" / "base2.yaml").write_text("num_epochs: 3\nlr: 0.5\n")
    (tmp_path / "other" / "base3.yaml").write_text("gamma: 0.9\n")
    monkeypatch.chdir(tmp_path / "other")  # elsewhere
    assert recipes.load(str(tmp_path / "sub" / "base1.yaml"), TrainConfig) == {"num_epochs": 3, "lr": 0.01,
                                                                                "gamma": 0.9}


def test_recipe_inside_a_config_file_is_applied_under_its_values(tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text("recipe: [ppo]\nclip_value: true\nlr: 0.01\n")
    cfg = resolve({"recipe": (str(path),)}, "classic")
    assert (cfg.separate_optimizers, cfg.dynamic_sampling, cfg.clip_value, cfg.lr) == (False, False, True, 0.01)
    assert cfg.recipe == (str(path),)
