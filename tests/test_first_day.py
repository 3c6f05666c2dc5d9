"""Rough edges a newcomer's first day found (issue #58, item 7): each fixed where a test can see it."""
import pytest

from core.algo.health import event_lines
from core.run.cli import main


def _refused(capsys, argv, tmp_path) -> str:
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not (tmp_path / "run").exists(), err
    return err


@pytest.mark.parametrize("env", ["simple_spread_v3", "mpe2.simple_spread_v3:parallel_env"])
def test_a_pettingzoo_env_given_to_a_single_agent_algorithm_names_the_multi_agent_ones(capsys, tmp_path, env):
    err = _refused(capsys, ["run", "--env", env, "--algo", "ppo"], tmp_path)
    assert "PettingZoo env" in err and "--algo mappo" in err


def test_an_env_module_whose_own_dependency_is_missing_says_so(capsys, tmp_path, monkeypatch):
    (tmp_path / "myenvs_missing_dep.py").write_text("import surely_not_installed_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    err = _refused(capsys, ["run", "--env", "myenvs_missing_dep:Make"], tmp_path)
    assert "imports 'surely_not_installed_pkg', which is not installed" in err and "PYTHONPATH" not in err


def test_an_option_named_as_in_sb3_gets_our_name():
    import core

    with pytest.raises(core.ConfigError, match="unknown option 'learning_rate'; did you mean 'lr'"):
        core.train(env="CartPole-v1", learning_rate=1e-3)


def test_health_events_are_explained_with_their_remedy():
    events = [{"step": 40960, "event": "policy_collapse", "detail": "recent mean far below best 212.0"}] * 7
    lines = event_lines(events)
    assert lines[0] == ("health: policy_collapse at step 40960 (recent mean far below best 212.0): restored the "
                        "policy of the best recent returns and widened eps_pi by 50% (the first time)")
    assert len(lines) == 6 and lines[-1].startswith("health: 2 more events")


def test_recipes_show_their_description(capsys):
    assert main(["recipes", "dapo-mujoco"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# DAPO's tuned MuJoCo settings") and "log_std_init: -1.0" in out


def test_multi_agent_and_dt_runs_name_their_settings():
    from dapo_dt.config import DTConfig
    from dapo_dt.runner import settings_line as dt_line
    from dapo_ma.config import resolve
    from dapo_ma.runner import settings_line as ma_line

    line = ma_line(resolve({"algo": "dapo-ma"}))
    assert line.startswith("dapo-ma on simple_spread_v3 [recipes: dapo-ma]: centralised critic; per-agent clips")
    assert "advantage-weighted draws" in line and "\n" not in line
    assert "uniform minibatches" in ma_line(resolve({"algo": "mappo"}))
    line = dt_line(DTConfig(algo="pct-bc", env="CartPole-v1", dataset_path="/d", context_len=20))
    assert line.startswith("pct-bc on CartPole-v1 [recipes: pct-bc]: dataset /d (best 10% of episodes)")
    assert "return-blind" in line


def test_progress_names_a_phase_and_never_reads_past_100_percent():
    import io

    from core.training.logging import Progress

    out = io.StringIO()
    bar = Progress(128, 0, "dapo-lm add", enabled=True, every_s=0.0, stream=out)
    bar.update(0, 80.0, float("nan"), "warm start 10/400 supervised steps")
    bar.update(384, 140.0, 0.5)
    first, second = out.getvalue().splitlines()
    assert "step 0/128 (0%) [warm start 10/400 supervised steps]" in first
    assert "step 384 (budget 128 reached)" in second and "%" not in second


def test_wandb_online_without_credentials_is_refused_before_any_file(monkeypatch, tmp_path):
    """wandb.init would wait at a prompt for an API key; the check runs in validation, before the run directory."""
    import importlib.util
    import types

    from core.config import limits

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "wandb" else real(name, *a))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc login
    cfg = types.SimpleNamespace(wandb=True, wandb_mode="online")
    with pytest.raises(limits.ConfigError, match="needs W&B credentials"):
        limits.check_wandb(cfg)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    limits.check_wandb(cfg)
    limits.check_wandb(types.SimpleNamespace(wandb=True, wandb_mode="offline"))


def test_compare_names_sequence_generation_runs_instead_of_a_missing_metric(tmp_path):
    import json

    import core

    runs = []
    for seed in (1, 2):
        d = tmp_path / f"lm{seed}"
        d.mkdir()
        (d / "summary.json").write_text(json.dumps({"algo": "dapo-lm", "task": "add", "heldout_accuracy": 0.5}))
        runs.append(d)
    with pytest.raises(core.ConfigError, match="is a sequence-generation run"):
        core.compare(runs, by="algo")


MUJOCO_TWICE_THEN_OURS = """
import pathlib, gymnasium, mujoco
xml = pathlib.Path(gymnasium.__file__).parent / "envs/mujoco/assets/half_cheetah.xml"
for _ in range(2):  # MuJoCo's own handler: each compile prints the warning (the baseline)
    mujoco.MjModel.from_xml_path(str(xml))
from core.envs.make import make_env, make_vec_env
for _ in range(2):
    make_env("HalfCheetah-v5").close()
make_vec_env("HalfCheetah-v5", 2).close()
"""


def test_mujoco_warnings_are_shown_once_per_process(tmp_path):
    """Rough edge 6: MuJoCo warned of 'settotalmass' on every HalfCheetah model compiled (and wrote MUJOCO_LOG.TXT
    into the working directory); the envs the toolkit makes show each MuJoCo warning once, on stderr."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("mujoco")
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", MUJOCO_TWICE_THEN_OURS], cwd=tmp_path, capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(repo)}, timeout=120)
    assert out.returncode == 0, out.stderr
    own = out.stderr.count("WARNING: compiler attribute 'settotalmass'")  # MuJoCo's own handler's lines
    if own == 0:
        pytest.skip("this MuJoCo does not warn of HalfCheetah's settotalmass")
    ours = out.stderr.count("MuJoCo warning (shown once): compiler attribute 'settotalmass'")
    assert (own, ours) == (2, 1), out.stderr  # the 2 baseline compiles; then 4 envs made (one vector of two): 1 line
    (tmp_path / "MUJOCO_LOG.TXT").unlink()  # written by the two baseline compiles only
    assert not list(tmp_path.iterdir())
