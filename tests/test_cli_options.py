"""How `dapo run` reads its options: --ext layering, key=value text, help texts, recipe files and `dapo recipes`,
options the env family would ignore, and docs/options.md against the parser."""
import dataclasses
import re
from pathlib import Path

import pytest

from core.run import recipes
from core.run.cli import build_parser, explicit_from_args, main
from core.config.fields import field_docs, first_sentence
from core.config.parsing import parse_kwargs_text
from core.config.errors import ConfigError
from core.config.options import TrainConfig
from core.run.presets import resolve
from core.run.registry import plugins

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
    cfg = resolve({"env": "Pendulum-v1", **_explicit(["--recipe", "dapo-mujoco", *argv])}, "continuous")
    assert cfg.extensions["kl_adaptive_lr"] == expect
    assert cfg.extensions["noise_floor"]["log_std_min"] == -1.2  # untouched


def test_ext_off_still_removes_an_extension_and_cannot_be_combined_with_options():
    cfg = resolve({"env": "Pendulum-v1", **_explicit(["--recipe", "dapo-mujoco", "--ext", "kl_adaptive_lr", "off"])},
                  "continuous")
    assert "kl_adaptive_lr" not in cfg.extensions and "noise_floor" in cfg.extensions
    with pytest.raises(ConfigError, match="both turned off and given options"):
        _explicit(["--ext", "kl_adaptive_lr", "target=0.1", "--ext", "kl_adaptive_lr", "off"])


# --- 2. help texts: first sentences and group titles ------------------------------------------------------------
@pytest.mark.parametrize("doc,expect", [
    ("Seed of the envs (0 .. 2**32-1). More.", "Seed of the envs (0 .. 2**32-1)."),
    ("dt (Chen et al. 2021) | dapo-dt. More.", "dt (Chen et al. 2021) | dapo-dt."),
    ("A clip, e.g. 0.28. More.", "A clip, e.g. 0.28."),
    ("Keep it, i.e. Adam. More.", "Keep it, i.e. Adam."),
    ("Fixed vs. Learned rules. More.", "Fixed vs. Learned rules."),
    ("Approx. value of it. More.", "Approx. value of it."),
    ("Ends here. Next sentence.", "Ends here."),
    ("No full stop", "No full stop"),
])
def test_first_sentence_does_not_stop_at_abbreviations_or_ranges(doc, expect):
    assert first_sentence(doc) == expect


@dataclasses.dataclass
class _Grouped:
    # --- online fine-tuning
    steps: int = 0
    """Steps."""
    # --- dapo-dt
    clip: float = 0.1
    """Clip."""


def test_group_titles_keep_their_dashes(capsys):
    assert field_docs(_Grouped)[1] == {"steps": "online fine-tuning", "clip": "dapo-dt"}
    out = _help(capsys, ["run", "--algo", "dapo-dt"])
    assert "online fine-tuning: --online-steps" in out and "dapo-dt: --[no-]advantage-weighting" in out


@pytest.mark.parametrize("algo", FAMILIES)
def test_every_familys_seed_help_shows_the_whole_range(capsys, algo):
    assert "(0 .. 2**32-1). [1]" in _help(capsys, ["run", "--algo", algo])


def test_dt_algo_help_is_not_cut_at_et_al(capsys):
    assert "dt (Chen et al. 2021) | dapo-dt (advantage-weighted" in _help(capsys, ["run", "--algo", "dt"])


# --- 3. key=value text ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expect", [
    ("N=3 max_cycles=25 continuous_actions=True", {"N": 3, "max_cycles": 25, "continuous_actions": True}),
    ("N=3,max_cycles=25", {"N": 3, "max_cycles": 25}),
    ("sizes=[1,2]", {"sizes": [1, 2]}),
    ("sizes=[1, 2] n=3", {"sizes": [1, 2], "n": 3}),
    ("shape=(4, 4)", {"shape": (4, 4)}),
    ("name='a b' other=\"c, d\"", {"name": "a b", "other": "c, d"}),
    ("d={'x':1}", {"d": {"x": 1}}),
    ("d={x: 1, y: [a, b]}", {"d": {"x": 1, "y": ["a", "b"]}}),
    ("steps=1e6 low=-inf mode=human flag=none", {"steps": 1e6, "low": float("-inf"), "mode": "human", "flag": None}),
    ("note=it's", {"note": "it's"}),
])
def test_kwargs_text_reads_lists_dicts_and_quoted_strings(text, expect):
    assert parse_kwargs_text(text) == expect


@pytest.mark.parametrize("text,expect", [
    ("sizes=[1,2", "unclosed bracket (no ']')"),
    ("sizes=1,2]", "unbalanced ']'"),
    ("shape=(1,2]", "unbalanced ']'"),
    ("name='a b", "unclosed quote '"),
    ("size", "'size' is not key=value"),
    ("s={1,2}", "'{1,2}' is a set"),
])
def test_kwargs_text_refuses_unbalanced_text_in_one_line(text, expect):
    with pytest.raises(ConfigError, match=re.escape(expect)) as e:
        parse_kwargs_text(text)
    assert "\n" not in str(e.value)


def test_env_kwargs_flag_and_ext_words_use_the_same_reader():
    assert _explicit(["--env-kwargs", "sizes=[64,64] name='a b'"])["env_kwargs"] == {"sizes": [64, 64], "name": "a b"}
    assert _explicit(["--ext", "kl_adaptive_lr", "target=0.1,", "max_scale=2"])["extensions"] == {
        "kl_adaptive_lr": {"target": 0.1, "max_scale": 2}}


# --- 4. dapo recipes lists every family's ---------------------------------------------------------------------
def test_recipes_lists_every_familys_recipes_grouped(capsys):
    assert main(["recipes"]) == 0
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if not line.startswith(" ") and line.endswith(":")]
    assert heads == [f"{f.name} ({', '.join(f.algos)}):" for f in plugins().families]
    for name in ("dapo-mujoco", "mappo", "dapo-ma", "maddpg", "dt", "dapo-dt"):
        assert re.search(rf"^  {name} +\S", out, re.MULTILINE), name


@pytest.mark.parametrize("name,expect", [("dapo-ma", "centralised_critic: true"), ("dapo-dt", "advantage_weighting: true"),
                                         ("mujoco", "log_std_init: -1.0")])
def test_recipes_shows_any_familys_recipe(capsys, name, expect):
    assert main(["recipes", name]) == 0
    assert expect in capsys.readouterr().out


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


# --- 7. options the env family would ignore ---------------------------------------------------------------------
@pytest.mark.parametrize("option,value,family,acts", [
    ("log_std_init", -1.0, "classic", False), ("log_std_init", -1.0, "atari", False),
    ("log_std_init", -1.0, "minigrid", False), ("log_std_init", -1.0, "continuous", True),
    ("precision", "bf16", "classic", False), ("precision", "bf16", "continuous", False),
    ("precision", "fp32", "minigrid", False), ("precision", "bf16", "atari", True),
])
def test_options_the_env_family_ignores_are_refused(option, value, family, acts):
    explicit = {option: value, **({"norm_obs": False} if family == "atari" else {})}
    if acts:
        assert getattr(resolve(explicit, family), option) == value
    else:
        with pytest.raises(ConfigError, match=f"--{option.replace('_', '-')} has no effect on .*{family} family"):
            resolve(explicit, family)


# --- 8. wording -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv,prog", [(["run", "--nope"], "dapo run"), (["eval", "somewhere", "--nope"], "dapo eval"),
                                       (["dataset", "info", "x/y-v0", "--nope"], "dapo dataset info")])
def test_unknown_flags_name_the_subcommand(capsys, argv, prog):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and err == f"{prog}: error: unrecognized arguments: --nope (see {prog} --help)"


def test_ext_without_a_value_shows_an_ext_example(capsys):
    assert main(["run", "--ext", "kl_adaptive_lr", "target"]) == 2
    err = capsys.readouterr().err
    assert "write e.g. '--ext kl_adaptive_lr target=0.05'" in err and "max_cycles" not in err


@pytest.mark.parametrize("algo", FAMILIES)
def test_run_dir_help_gives_the_names_runs_get(algo):
    from core.run.runner import default_run_dir

    cls = plugins().family_of(algo).config_class
    pattern = re.search(r"runs/(\S+)\)", field_docs(cls)[0]["run_dir"]).group(1)
    regex = re.escape(pattern).replace("<env>", "CartPole-v1").replace("<algo>", algo).replace("<seed>", "7")
    name = default_run_dir(cls(env="CartPole-v1", algo=algo, seed=7)).name
    assert re.fullmatch(regex.replace("<time>", r"\d{8}-\d{6}"), name), (pattern, name)


@pytest.mark.parametrize("algo", FAMILIES)
def test_option_help_speaks_cli_not_python(algo):
    cls = plugins().family_of(algo).config_class
    for name, doc in field_docs(cls)[0].items():
        assert not re.search(r"\bNone\b", doc), (name, doc)


def test_the_commands_own_flags_start_uppercase_and_the_usage_names_ext(capsys):
    parser = _run_parser("dapo")
    run = next(a for a in parser._actions if a.dest == "command").choices["run"]
    fields = {f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(TrainConfig)}
    own = [a for a in run._actions if a.option_strings and a.option_strings[0] not in fields | {"-h"}]
    assert {a.option_strings[0] for a in own} == {"--config", "--resume", "--ext", "--trust-env"}
    assert all(a.help[0].isupper() for a in own) and run._option_string_actions["--recipe"].help[0].isupper()
    assert "[--ext NAME [K=V ...]]" in run.format_usage()
    mappo = next(a for a in _run_parser("mappo")._actions if a.dest == "command").choices["run"]
    assert "--ext" not in mappo.format_usage() and "--ext" not in mappo._option_string_actions  # no extensions there


def test_eval_stochastic_default_says_when_it_is_on(capsys):
    out = _help(capsys, ["eval"])
    assert "[on if the run's eval_deterministic is off]" in out and "[the run's eval_deterministic]" not in out


def test_docs_lists_exactly_the_flags_dapo_run_accepts():
    text = (REPO / "docs" / "options.md").read_text()
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    for fam in plugins().families:
        section = next(s for s in sections if s.startswith(f"{fam.name}:"))
        documented = re.findall(r"^\| `(--[\w-]+)`", section, re.MULTILINE)
        run = next(a for a in _run_parser(fam.algos[0])._actions if a.dest == "command").choices["run"]
        accepted = [a.option_strings[0] for a in run._actions if a.option_strings and a.option_strings[0] != "-h"]
        assert sorted(documented) == sorted(accepted), fam.name
        assert "--extensions" not in documented and {"--config", "--resume"} <= set(documented)


def test_docs_command_takes_an_output_path_and_help(tmp_path, monkeypatch, capsys):
    from core.run import docs

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        docs.main(["--help"])
    assert exc.value.code == 0 and "usage: python -m core.run.docs [-h] [out]" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        docs.main(["--out"])
    assert exc.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
    assert docs.main([str(tmp_path / "o.md")]) == 0
    assert (tmp_path / "o.md").read_text() == docs.options_markdown()


def test_shared_option_groups_are_declared_once_and_listed_where_each_family_puts_them():
    """The sampler and health groups (core/config/groups.py) are the same fields with the same help in both families'
    configs, each family keeping its own collapse window; --help, docs and config.yaml list them at the family's
    ``# +Group`` line, not first (as base-class fields would be)."""
    import dataclasses

    from core.config.groups import DivergenceOptions, HealthOptions, SamplerOptions
    from core.config.options import TrainConfig
    from core.config.fields import field_docs, ordered_fields
    from dapo_ma.config import MAConfig

    shared = [f.name for g in (SamplerOptions, HealthOptions, DivergenceOptions) for f in dataclasses.fields(g)]
    for cls in (TrainConfig, MAConfig):
        docs = field_docs(cls)[0]
        assert all(docs[name] == field_docs(g)[0].get(name, docs[name]) for name in shared
                   for g in (SamplerOptions, HealthOptions, DivergenceOptions))
    assert TrainConfig().collapse_window == 10 and MAConfig().collapse_window == 100
    names = [f.name for f in ordered_fields(TrainConfig)]
    assert names[:2] == ["env", "env_kwargs"]
    assert names[names.index("resampling") + 1] == "temperature_mode"
    assert names[names.index("collapse_confirm") + 1] == "divergence_window"
    ma = [f.name for f in ordered_fields(MAConfig)]
    assert ma[ma.index("collapse_drop") + 1:ma.index("collapse_drop") + 3] == ["collapse_min_gain", "divergence_window"]
