"""No file the toolkit reads runs code: an env that a run's config.yaml or a recipe file names as ``module:factory``
is imported only after --trust-env (Python: trust_env=True) or when the user names it again; env kwargs reach env
constructors only.  (core/config/trust.py)"""
import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

import core
from core.run.cli import main
from core.config.errors import ConfigError

USER_ENVS = Path(__file__).parent / "user_envs"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "cartpole"
    assert main(["run", "--algo", "ppo", "--total-steps", "256", "--num-envs", "2", "--num-steps", "64",
                 "--num-minibatches", "2", "--eval-episodes", "2", "--no-progress", "--no-tensorboard",
                 "--run-dir", str(run)]) == 0
    return run


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


def _edit(src: Path, dst: Path, **changes) -> Path:
    """A copy of the run ``src`` whose config.yaml has ``changes``."""
    shutil.copytree(src, dst)
    saved = yaml.safe_load((dst / "config.yaml").read_text())
    (dst / "config.yaml").write_text(yaml.safe_dump({**saved, **changes}, sort_keys=False))
    return dst


def _hostile_env(marker: Path) -> dict:
    """The reviewer's reproduction: subprocess.run(args="touch MARKER", shell=True) as the env factory."""
    return {"env": "subprocess:run", "env_kwargs": {"args": f"touch {marker}", "shell": True}}


def _one_line(capsys, argv, expect):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for part in expect:
        assert part in err, err


def test_a_run_whose_config_names_code_is_not_reopened_without_confirmation(finished, tmp_path, capsys):
    marker = tmp_path / "PWNED"
    run = _edit(finished, tmp_path / "run", **_hostile_env(marker))
    before = _tree(run)
    why = ("names env 'subprocess:run'", "would import and run code named by that file", "--trust-env")
    _one_line(capsys, ["eval", str(run)], why)
    _one_line(capsys, ["run", "--resume", str(run), "--total-steps", "512"], why)
    with pytest.raises(ConfigError, match="trust_env=True"):
        core.load(run)
    with pytest.raises(ConfigError, match="trust_env=True"):
        core.train(resume=run, total_steps=512)
    assert not marker.exists() and _tree(run) == before


def test_a_recipe_file_that_names_code_is_not_imported_without_confirmation(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    recipe = tmp_path / "evil.yaml"
    recipe.write_text(yaml.safe_dump(_hostile_env(marker)))
    _one_line(capsys, ["run", "--config", str(recipe)], (f"recipe {recipe} names env 'subprocess:run'", "--trust-env"))
    _one_line(capsys, ["run", "--algo", "mappo", "--recipe", str(recipe)], ("names env 'subprocess:run'",))
    with pytest.raises(ConfigError, match="trust_env=True"):
        core.train(config=str(recipe))
    assert not marker.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["evil.yaml"]


def test_a_trusted_or_repeated_env_is_reopened(finished, tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(USER_ENVS))
    run = tmp_path / "reach"
    assert main(["run", "--env", "mymod:make_env", "--env-kwargs", "size=4", "--algo", "ppo", "--total-steps", "256",
                 "--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--eval-episodes", "1",
                 "--no-progress", "--no-tensorboard", "--run-dir", str(run)]) == 0
    _one_line(capsys, ["eval", str(run)], ("mymod:make_env", "--trust-env"))
    assert main(["eval", str(run), "--episodes", "2", "--trust-env"]) == 0
    assert main(["run", "--resume", str(run), "--env", "mymod:make_env", "--total-steps", "384", "--no-progress"]) == 0
    assert main(["run", "--resume", str(run), "--trust-env", "--total-steps", "512", "--no-progress"]) == 0
    assert core.load(run, trust_env=True).make_env().unwrapped.size == 4
    assert main(["eval", str(finished), "--episodes", "2"]) == 0  # a registered id needs no confirmation


def test_other_families_refuse_an_env_their_config_names(finished, tmp_path, capsys):
    """dapo_ma builds envs from 'module:make_env' or a module's parallel_env(); dapo_dt from Gymnasium ids."""
    import dapo_ma
    from core.config.parsing import write_yaml_config
    from dapo_ma.config import resolve as resolve_ma

    marker = tmp_path / "PWNED"
    ma = tmp_path / "ma"
    ma.mkdir()
    saved = yaml.safe_load(write_yaml_config(resolve_ma({"algo": "mappo", "env_kwargs": {"N": 2}})))
    (ma / "config.yaml").write_text(yaml.safe_dump({**saved, **_hostile_env(marker)}))
    _one_line(capsys, ["eval", str(ma)], ("names env 'subprocess:run'", "--trust-env"))
    with pytest.raises(ConfigError, match="trust_env=True"):
        dapo_ma.load(ma)
    (ma / "config.yaml").write_text(yaml.safe_dump({**saved, "env": "os"}))  # a module with no parallel_env
    _one_line(capsys, ["eval", str(ma)], ("names env 'os'",))
    dt = tmp_path / "dt"
    dt.mkdir()
    (dt / "config.yaml").write_text(yaml.safe_dump({"algo": "dt", "dataset": "x/y-v0", "context_len": 30,
                                                    "env": "subprocess:run"}))
    _one_line(capsys, ["eval", str(dt)], ("names env 'subprocess:run'", "--trust-env"))
    assert not marker.exists()


@pytest.mark.parametrize("env,imports", [("CartPole-v1", False), ("ALE/Pong-v5", False), ("MiniGrid-Empty-5x5-v0", False),
                                         ("dapo-local/f-12ab", False), ("nosuchmodule:Env-v0", False),
                                         ("subprocess:run", True), ("os.system", True), ("json:Env-v0", True)])
def test_which_gymnasium_env_strings_import_code(env, imports):
    from core.envs.make import imports_code
    assert imports_code(env) is imports


@pytest.mark.parametrize("env,imports", [("simple_spread_v3", False), ("mpe2.simple_spread_v3", False),
                                         ("simple_spread_v3:parallel_env", False), ("subprocess:run", True),
                                         ("simple_spread_v3:raw_env", True), ("os", True)])
def test_which_pettingzoo_env_strings_import_code(env, imports):
    from dapo_ma.envs import imports_code
    assert imports_code(env) is imports


def test_env_kwargs_reach_the_env_constructor_only():
    from core.envs.make import make_env, make_vec_env
    for name in ("wrappers", "vector_kwargs", "vectorization_mode", "max_episode_steps", "disable_env_checker"):
        with pytest.raises(ConfigError, match=f"--env-kwargs {name} is an argument of gymnasium.make"):
            make_env("CartPole-v1", {name: 1})
        with pytest.raises(ConfigError, match=f"--env-kwargs {name} is an argument of gymnasium.make"):
            make_vec_env("CartPole-v1", 1, env_kwargs={name: 1})
