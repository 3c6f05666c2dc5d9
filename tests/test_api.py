"""The Python API (core.train / core.load / Agent) and users' own environments, from Python and from the CLI."""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import core
from core.config.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
USER_ENVS = Path(__file__).parent / "user_envs"
TINY = dict(total_steps=2048, num_envs=4, num_steps=64, num_epochs=2, num_minibatches=4, progress=False,
            tensorboard=False, eval_episodes=2)


@pytest.fixture
def user_envs(monkeypatch):
    """The user's env module importable, as if on PYTHONPATH."""
    monkeypatch.syspath_prepend(str(USER_ENVS))
    import mymod
    return mymod


def test_train_load_predict_evaluate(tmp_path):
    r = core.train(env="CartPole-v1", algo="ppo", run_dir=str(tmp_path / "r"), **TINY)
    assert r.run_dir == tmp_path / "r" and r.summary["total_steps"] == 2048 and r.config.algo == "ppo"
    import gymnasium
    import torch

    software = r.summary["software"]  # the releases the numbers came from (MuJoCo's physics, torch's kernels)
    assert software["torch"] == torch.__version__ and software["gymnasium"] == gymnasium.__version__
    assert "dapo-toolkit" in software and "python" in software
    agent = core.load(r.run_dir)
    env = agent.make_env()
    obs, _ = env.reset(seed=0)
    action = agent.predict(obs)  # a raw, single observation -> one valid action
    assert env.action_space.contains(int(action))
    batch = agent.predict(np.stack([obs, obs, obs]), deterministic=True)
    assert batch.shape == (3,) and (batch == action).all()
    ev = agent.evaluate(episodes=3)
    assert len(ev.returns) == 3 and ev.mean == pytest.approx(np.mean(ev.returns))
    assert ev.std == pytest.approx(np.std(ev.returns, ddof=1))
    with pytest.raises(ValueError, match="does not match the env's"):
        agent.predict(np.zeros(7))


def test_predict_clips_box_actions_and_uses_the_saved_normaliser(tmp_path):
    r = core.train(env="Pendulum-v1", algo="grpo", run_dir=str(tmp_path / "r"), total_steps=512, num_steps=256,
                   num_minibatches=4, progress=False, tensorboard=False, eval_episodes=0)
    agent = core.load(r.run_dir)
    assert agent.config.norm_obs and agent.obs_norm.rms.count > 1  # the run's statistics, not fresh ones
    actions = agent.predict(np.random.default_rng(0).normal(0, 50, (64, 3)), deterministic=False)
    assert actions.shape == (64, 1) and np.all(np.abs(actions) <= 2.0)


def test_options_are_checked_like_the_cli(tmp_path):
    with pytest.raises(ConfigError, match="unknown option 'lrr'; did you mean 'lr'"):
        core.train(env="CartPole-v1", lrr=0.1, run_dir=str(tmp_path / "a"))
    with pytest.raises(ConfigError, match="unknown --algo 'dapoo'.*choose one of: ppo, grpo, dapo"):
        core.train(algo="dapoo", run_dir=str(tmp_path / "b"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_config_objects_dicts_and_yaml_files_give_the_same_run(tmp_path):
    from core.config.options import TrainConfig

    yaml_path = tmp_path / "exp.yaml"
    yaml_path.write_text("algo: grpo\nnum_envs: 4\nnum_steps: 64\n")
    configs = [TrainConfig(algo="grpo", num_envs=4, num_steps=64), {"algo": "grpo", "num_envs": 4, "num_steps": 64},
               yaml_path]
    finals = []
    for i, config in enumerate(configs):
        r = core.train(config, run_dir=str(tmp_path / f"r{i}"), total_steps=512, num_minibatches=2, progress=False,
                       tensorboard=False, eval_episodes=0)
        finals.append((r.config.algo, r.summary["final_return_mean"]))
    assert finals[0] == finals[1] == finals[2] and finals[0][0] == "grpo"


def test_resume_from_python(tmp_path):
    r = core.train(env="CartPole-v1", algo="dapo", run_dir=str(tmp_path / "r"), **TINY)
    more = core.train(resume=r.run_dir, total_steps=4096, progress=False)
    assert more.summary["total_steps"] == 4096 and more.run_dir == r.run_dir


@pytest.mark.parametrize("env", ["mymod:Reach-v0", "mymod:make_env", "mymod.ReachEnv"])
def test_a_users_env_by_name(tmp_path, user_envs, env):
    r = core.train(env=env, env_kwargs={"size": 4}, algo="ppo", run_dir=str(tmp_path / "r"), **TINY)
    assert r.config.env == env and r.config.env_kwargs == {"size": 4}
    with pytest.raises(ConfigError, match="would import and run code named by that file; .*--trust-env"):
        core.load(r.run_dir)  # the env is named by config.yaml: reopening it needs the user's word
    agent = core.load(r.run_dir, trust_env=True)
    assert agent.make_env().unwrapped.size == 4 and len(agent.evaluate(episodes=2).returns) == 2


def test_a_users_env_class_or_factory_as_a_python_object(tmp_path, user_envs):
    r = core.train(env=user_envs.ReachEnv, env_kwargs={"size": 6}, algo="ppo", run_dir=str(tmp_path / "cls"), **TINY)
    assert r.config.env == "mymod:ReachEnv"  # recorded so that eval and resume can make it again
    assert core.load(r.run_dir, trust_env=True).make_env().unwrapped.size == 6
    assert core.load(r.run_dir, env=user_envs.ReachEnv).make_env().unwrapped.size == 6  # given again: confirmed
    local = core.train(env=lambda size=5: user_envs.ReachEnv(size), algo="ppo", run_dir=str(tmp_path / "lambda"),
                       **TINY)
    assert local.config.env.startswith("dapo-local/")
    agent = core.load(local.run_dir, env=lambda size=5: user_envs.ReachEnv(size))  # a lambda must be passed again
    assert len(agent.evaluate(episodes=1).returns) == 1


def test_a_run_on_a_lambda_resumes_with_the_env_passed_again(tmp_path, user_envs):
    local = core.train(env=lambda: user_envs.ReachEnv(size=4), algo="ppo", run_dir=str(tmp_path / "r"), **TINY)
    more = core.train(resume=local.run_dir, total_steps=4096, env=lambda: user_envs.ReachEnv(size=4), progress=False)
    assert more.summary["total_steps"] == 4096 and more.config.env.startswith("dapo-local/")
    with pytest.raises(ConfigError, match=r"was a Python callable .*core.train\(resume=run_dir, env=make_env\)"):
        core.train(resume=local.run_dir, env="CartPole-v1")  # not a callable: the hint says how
    from core.envs.make import resolve_env_id
    with pytest.raises(ConfigError, match=r"core.train\(resume=run_dir, env=make_env\)"):
        resolve_env_id("dapo-local/make_env-1234")  # another process: the saved id names nothing


def test_a_yaml_config_resolves_like_dapo_run_config(tmp_path, monkeypatch):
    """core.train(config=FILE) and dapo run --config FILE resolve the same config; the file's env picks the presets
    (Pendulum: the continuous family's) and its env kwargs are checked before anything is made."""
    import core.run.runner
    from core.run.cli import main

    seen = []
    monkeypatch.setattr(core.run.runner, "run_experiment", lambda cfg, resume=False: seen.append(cfg) or {"run_dir": "-"})
    monkeypatch.setattr(core.run.runner, "summary_line", lambda summary: "")
    path = tmp_path / "pend.yaml"
    path.write_text("env: Pendulum-v1\nenv_kwargs: {g: 9.0}\n")
    assert main(["run", "--config", str(path)]) == 0
    core.train(config=str(path))
    cli, python = seen
    assert cli == python and cli.env == "Pendulum-v1" and cli.env_kwargs == {"g": 9.0}
    assert cli.norm_obs and cli.num_steps == 2048  # the continuous family's presets, not CartPole's
    path.write_text("env: CartPole-v1\nenv_kwargs: 'size=5'\n")
    with pytest.raises(ConfigError, match="cannot create env 'CartPole-v1'"):
        core.train(config=str(path))


def _dapo(*args, env_path=True, check=True):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if env_path:
        env["PYTHONPATH"] = os.pathsep.join([str(USER_ENVS), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "core", *args], capture_output=True, text=True, cwd=REPO, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.slow
def test_a_users_env_from_the_cli_then_eval_and_resume(tmp_path):
    """dapo run --env mymod:Reach-v0 --env-kwargs 'size=5' trains; eval and --resume reopen the run (same
    PYTHONPATH); without the module on the path, one line and exit 2."""
    run = tmp_path / "reach"
    _dapo("run", "--env", "mymod:Reach-v0", "--env-kwargs", "size=5", "--total-steps", "10000", "--run-dir", str(run),
          "--no-progress", "--no-tensorboard")
    saved = (run / "config.yaml").read_text()
    assert "env: mymod:Reach-v0" in saved and "size: 5" in saved
    untrusted = _dapo("eval", str(run), check=False)
    assert untrusted.returncode == 2 and "--trust-env" in untrusted.stderr
    assert "eval_return_mean" in _dapo("eval", str(run), "--episodes", "3", "--trust-env").stdout
    _dapo("run", "--resume", str(run), "--total-steps", "12000", "--no-progress", "--trust-env")
    assert json.loads((run / "summary.json").read_text())["total_steps"] >= 12000
    missing = _dapo("eval", str(run), env_path=False, check=False)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "cannot import module 'mymod'" in missing.stderr
    bad = _dapo("run", "--env", "nosuchmod:Env-v0", "--run-dir", str(tmp_path / "x"), check=False)
    assert bad.returncode == 2 and "cannot import module 'nosuchmod'" in bad.stderr and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_the_readme_python_example_reaches_450_on_cartpole(tmp_path, monkeypatch):
    """The issue's acceptance line: DAPO on CartPole-v1, 50k steps, seed 1, evaluated over 5 episodes."""
    monkeypatch.chdir(tmp_path)
    r = core.train(env="CartPole-v1", algo="dapo", total_steps=50000, seed=1, progress=False)
    agent = core.load(r.run_dir)
    result = agent.evaluate(episodes=5)
    assert result.mean >= 450, result


def test_multi_agent_api_with_a_users_parallel_env_factory(tmp_path):
    import dapo_ma
    from mpe2 import simple_spread_v3

    def make(N=2, max_cycles=25):
        return simple_spread_v3.parallel_env(N=N, max_cycles=max_cycles)
    r = dapo_ma.train(env=make, env_kwargs={"N": 2}, algo="mappo", total_steps=400, num_envs=2, num_epochs=1,
                      run_dir=str(tmp_path / "ma"), progress=False, tensorboard=False, eval_episodes=1)
    agent = dapo_ma.load(r.run_dir, env=make)
    env = make(N=2)
    obs, _ = env.reset(seed=0)
    actions = agent.predict(obs)
    assert set(actions) == set(obs) and all(env.action_space(a).contains(x) for a, x in actions.items())
    assert len(agent.evaluate(episodes=2).returns) == 2
    assert core.load(r.run_dir, env=make).config.algo == "mappo"  # core.load dispatches on the run's family


def test_core_imports_nothing_from_the_packages_above_it():
    """core is the foundation: dapo_ma, dapo_dt, dapo_lm and experiments register with it, never the reverse."""
    above = ("dapo_ma", "dapo_dt", "dapo_lm", "experiments")
    for path in sorted((REPO / "core").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] not in above, f"{path.relative_to(REPO)} imports {name}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not node.value.startswith(tuple(f"{a}." for a in above)), \
                    f"{path.relative_to(REPO)} names {node.value}"


def test_public_api_is_exported():
    import dapo_dt
    import dapo_ma
    for module in (core, dapo_ma, dapo_dt):
        assert {"train", "load"} <= set(module.__all__)
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
    for block in ("policy_loss", "value_loss", "gae", "DynamicSampler", "Temperature", "PolicyCollapseMonitor",
                  "ValueDivergenceMonitor", "NonFiniteGuard", "sampling_probs", "Extension"):
        assert block in core.__all__


def test_a_family_train_takes_the_algorithm_from_a_recipe(tmp_path):
    """dapo_ma.train without --algo: the family's default, unless a recipe names the algorithm."""
    import dapo_ma

    (tmp_path / "maddpg.yaml").write_text("algo: maddpg\nlearning_starts: 100\nbatch_size: 16\n")
    r = dapo_ma.train(recipe=str(tmp_path / "maddpg.yaml"), env_kwargs={"N": 2}, total_steps=400, num_steps=25,
                      run_dir=str(tmp_path / "r"), progress=False, tensorboard=False, eval_episodes=0)
    assert r.config.algo == "maddpg" and r.config.learning_starts == 100
    plain = dapo_ma.train(env_kwargs={"N": 2}, total_steps=400, num_envs=2, num_epochs=1, run_dir=str(tmp_path / "p"),
                          progress=False, tensorboard=False, eval_episodes=0)
    assert plain.config.algo == "dapo-ma"
