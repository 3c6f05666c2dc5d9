"""Recipes as data: every shipped recipe resolves, and every benchmark recipe resolves to exactly the config recorded
in the committed results it stands for, so the committed tables stay reproducible from recipes."""
import csv
import dataclasses
from pathlib import Path

import pytest
import yaml

from core.config.groups import WANDB_FIELDS
from core.run import recipes
from core.config.parsing import coerce_mapping
from core.config.options import TrainConfig
from core.config.legacy import translate
from core.run.presets import resolve

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
MUJOCO = ROOT / "experiments" / "recipes" / "mujoco"
# Fields that do not change what a run trains (where it writes or logs, how often it checkpoints or reports)
RUNTIME = {"env", "seed", "total_steps", "run_dir", "progress", "progress_every_s", "tensorboard", "checkpoint_every_s",
           "recipe", *WANDB_FIELDS}
RECORDS = sorted(RESULTS.rglob("variants.yaml"))


def _resolved(recipe: str) -> dict:
    cfg = resolve({"recipe": (str(MUJOCO / f"{recipe}.yaml"),), "env": "Walker2d-v5"}, "continuous")
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in RUNTIME}


def _recorded(config: dict) -> dict:
    values = coerce_mapping(translate({k: v for k, v in config.items() if k not in RUNTIME}, "record"), TrainConfig,
                            "record")
    return {"extensions": {}, "env_kwargs": {}, **values}  # options added after the record: their defaults


@pytest.mark.parametrize("record", RECORDS, ids=lambda p: str(p.parent.relative_to(RESULTS)))
def test_every_recipe_resolves_to_the_config_its_committed_results_record(record):
    entries = yaml.safe_load(record.read_text())
    with open(record.parent / "results.csv", newline="") as f:
        labels = {r["variant"] for r in csv.DictReader(f)}
    assert labels <= set(entries), f"{record}: rows without a recorded config: {sorted(labels - set(entries))}"
    for label, entry in entries.items():
        if entry["recipe"] is None:  # the SB3 peer, or a variant whose option was removed (the record keeps it)
            assert entry["config"] is None or "removed" in entry, (record, label)
            continue
        assert _resolved(entry["recipe"]) == _recorded(entry["config"]), (record, label, entry["recipe"])


def test_the_suites_name_existing_recipes_and_every_recipe_is_used():
    from experiments.mujoco_benchmark import load_suites
    suites = load_suites()
    named = {r for table in suites.values() for r in table.values() if r is not None}
    on_disk = {p.stem for p in MUJOCO.glob("*.yaml")}
    recorded = {e["recipe"] for r in RECORDS for e in yaml.safe_load(r.read_text()).values() if e["recipe"]}
    assert named <= on_disk and recorded <= on_disk
    assert on_disk <= named | recorded, f"recipes nothing uses: {sorted(on_disk - named - recorded)}"
    for name in on_disk:
        assert isinstance(yaml.safe_load((MUJOCO / f"{name}.yaml").read_text()).get("description"), str), name


@pytest.mark.parametrize("name", sorted(recipes.describe()))
def test_every_shipped_recipe_loads_and_resolves(name):
    assert recipes.describe()[name], f"recipe {name} has no description"
    family = name if name in ("classic", "continuous", "atari", "minigrid") else "continuous"
    env = {"continuous": "Hopper-v5", "minigrid": "MiniGrid-Empty-5x5-v0"}.get(family, "CartPole-v1")
    cfg = resolve({"recipe": (name,), "env": env}, family)
    assert cfg.recipe == (name,)


# What the dapo-mujoco recipe changes from plain dapo on a Box-action env: the settings --algo dapo got on those envs
# by itself until issue #54, and that the 1M-step tables' dapo column was run with.
DAPO_MUJOCO = {"auto_lambda": True, "eps_v_start": 0.2, "eps_v_schedule": "constant", "dynamic_sampling": False,
               "collapse_confirm": 1, "log_std_init": -1.0, "joint_grad_clip": True,
               "extensions": {"kl_adaptive_lr": {"target": 0.05, "max_scale": 1.0},
                              "noise_floor": {"log_std_min": -1.2, "relative": True, "anneal": True,
                                              "anneal_start": 0.5}}}


@pytest.mark.parametrize("algo", ["ppo", "grpo", "dapo"])
def test_an_algorithm_takes_the_same_recipe_on_every_env(algo):
    """The shipped layers are the env family's recipe and the algorithm's, nothing attached to the pair: on a Box-action
    env and on a Discrete one the configs differ only in what the two family recipes set (and the values derived
    from those: the window and the critic lr)."""
    from core.run.presets import layers

    assert layers(algo, "continuous") == ["continuous", algo] and layers(algo, "classic") == ["classic", algo]
    box = dataclasses.asdict(resolve({"algo": algo, "env": "HalfCheetah-v5"}, "continuous"))
    discrete = dataclasses.asdict(resolve({"algo": algo, "env": "CartPole-v1"}, "classic"))
    family = set(recipes.load("continuous", TrainConfig)) | set(recipes.load("classic", TrainConfig))
    differ = {k for k in box if box[k] != discrete[k]}
    assert differ <= family | {"env", "window", "critic_lr"}, sorted(differ - family)
    for name, value in recipes.load(algo, TrainConfig).items():  # the algorithm's recipe, as written, on both
        assert box[name] == discrete[name] == value, name


def test_the_dapo_mujoco_recipe_reproduces_the_old_box_action_dapo_field_by_field():
    """--recipe dapo-mujoco gives, field by field, the config --algo dapo resolved to on Box-action envs before the
    recipe stopped being attached by itself (DAPO_MUJOCO over plain dapo), which is the config the committed 1M-step
    dapo rows record; plain --algo dapo differs from it in exactly those fields."""
    plain = dataclasses.asdict(resolve({"algo": "dapo", "env": "HalfCheetah-v5"}, "continuous"))
    named = resolve({"algo": "dapo", "env": "HalfCheetah-v5", "recipe": ("dapo-mujoco",)}, "continuous")
    assert named.recipe == ("dapo-mujoco",)
    named = dataclasses.asdict(named)
    assert named == {**plain, **DAPO_MUJOCO, "recipe": ("dapo-mujoco",)}
    for name, value in plain.items():
        if name in DAPO_MUJOCO:
            assert value != DAPO_MUJOCO[name] and named[name] == DAPO_MUJOCO[name], name
        elif name != "recipe":
            assert named[name] == value, name
    alone = resolve({"env": "HalfCheetah-v5", "recipe": ("dapo-mujoco",)}, "continuous")  # the recipe picks dapo
    assert dataclasses.replace(alone, recipe=()) == dataclasses.replace(resolve(
        {"algo": "dapo", "env": "HalfCheetah-v5", "recipe": ("dapo-mujoco",)}, "continuous"), recipe=())
    record = yaml.safe_load((RESULTS / "mujoco_1M" / "variants.yaml").read_text())["dapo"]["config"]
    on_walker = resolve({"algo": "dapo", "env": "Walker2d-v5", "recipe": ("dapo-mujoco",)}, "continuous")
    assert {k: v for k, v in dataclasses.asdict(on_walker).items() if k not in RUNTIME} == _recorded(record)
    grpo = resolve({"algo": "grpo", "env": "Hopper-v5", "recipe": ("mujoco",)}, "continuous")  # the recipe on GRPO
    assert (grpo.log_std_init, grpo.joint_grad_clip, set(grpo.extensions)) == (
        -1.0, True, {"kl_adaptive_lr", "noise_floor"})
