"""dapo tune (core/run/tune.py): trials as run directories, the study resumed from its database and shared by
processes, pruning from the learning curve, the best trial as a recipe that dapo run takes, and bad input as one
line, exit 2 and nothing written."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.config.errors import ConfigError
from core.run.cli import main

optuna = pytest.importorskip("optuna")

REPO = Path(__file__).resolve().parents[1]
# 2 envs x 128 steps: 4 iterations of a 1024-step budget, about a second each on CartPole
BASE = ["--total-steps", "1024", "--num-envs", "2", "--num-steps", "128", "--num-minibatches", "2",
        "--eval-episodes", "1", "--no-progress", "--no-tensorboard"]
SPACE = "lr: {low: 1.0e-4, high: 1.0e-2, log: true}\nnum_epochs: {low: 1, high: 3}\n"


def _space(tmp_path: Path, text: str = SPACE) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


def _trials(study_dir: Path) -> list[dict]:
    with open(study_dir / "trials.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_study_resumes_to_n_trials_and_its_best_recipe_runs_as_is(tmp_path, capsys):
    space, study = _space(tmp_path), tmp_path / "study"
    assert main(["tune", str(space), "--study-dir", str(study), "--n-trials", "2", *BASE]) == 0
    assert [r["trial"] for r in _trials(study)] == ["0", "1"]
    # --n-trials is the study's total: 3 after 2 runs one more
    assert main(["tune", str(space), "--study-dir", str(study), "--n-trials", "3", *BASE]) == 0
    rows = _trials(study)
    assert [r["trial"] for r in rows] == ["0", "1", "2"] and {r["state"] for r in rows} <= {"complete", "pruned"}
    assert sorted(p.name for p in (study / "trials").iterdir()) == ["0000", "0001", "0002"]
    for row in rows:  # ordinary run directories
        assert (Path(row["run_dir"]) / "config.yaml").is_file() and (Path(row["run_dir"]) / "checkpoint.pt").is_file()
    assert (study / "trials.png").stat().st_size > 1000 and (study / "trials.md").read_text().count("\n") == 5
    printed = capsys.readouterr().out
    assert "train it with: dapo run --recipe" in printed
    complete = [r for r in rows if r["state"] == "complete"]
    best = max(complete, key=lambda r: float(r["value"]))
    recipe = yaml.safe_load((study / "best_recipe.yaml").read_text())
    assert recipe["num_epochs"] == int(best["num_epochs"]) and "progress" not in recipe
    # dapo run takes the recipe as it is and resolves the best trial's settings
    run = tmp_path / "rerun"
    assert main(["run", "--recipe", str(study / "best_recipe.yaml"), "--run-dir", str(run), "--no-progress",
                 "--no-tensorboard"]) == 0
    again, trial = (yaml.safe_load((d / "config.yaml").read_text()) for d in (run, Path(best["run_dir"])))
    differ = {k for k in again if again[k] != trial[k]}
    assert differ == {"run_dir", "recipe"}, differ


def test_a_trial_of_a_killed_process_is_not_counted(tmp_path):
    """A trial left running by a process that is gone is marked failed and another takes its place."""
    import core
    from core.run.tune import STUDY_NAME

    space, study = _space(tmp_path, "num_epochs: {low: 1, high: 3}\n"), tmp_path / "study"
    options = dict(total_steps=512, num_envs=2, num_steps=128, num_minibatches=2, eval_episodes=1, progress=False,
                   tensorboard=False)
    core.tune(space, study, n_trials=1, **options)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    storage = f"sqlite:///{study / 'study.db'}"
    orphan = optuna.load_study(study_name=STUDY_NAME, storage=storage).ask()
    orphan.set_user_attr("host", os.uname().nodename)
    orphan.set_user_attr("pid", dead.pid)
    result = core.tune(space, study, n_trials=2, progress_every_s=5.0, **options)  # display options may differ
    states = [t.state.name for t in optuna.load_study(study_name=STUDY_NAME, storage=storage).trials]
    assert states[1] == "FAIL" and len(states) == 3 and states[2] in ("COMPLETE", "PRUNED")
    assert result.best_recipe == study / "best_recipe.yaml" and result.best_params.keys() == {"num_epochs"}


def test_a_curve_below_the_median_is_pruned():
    """The reporter reports the running return at each percent of the budget passed and prunes below the median."""
    from types import SimpleNamespace

    from core.run.tune import TuneOptions, _reporter

    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(1, 10))
    good = study.ask()
    for step in range(1, 101):
        good.report(100.0, step)
    study.tell(good, 100.0)
    trial = study.ask()
    hook = _reporter(trial, TuneOptions(), optuna)
    trainer = SimpleNamespace(recent_return=lambda: float("nan"), global_step=100, cfg=SimpleNamespace(total_steps=1000))
    hook(trainer, {})  # no finished episode yet: nothing reported
    assert trial.storage.get_trial(trial._trial_id).intermediate_values == {}
    trainer.recent_return, trainer.global_step = (lambda: 5.0), 150
    with pytest.raises(optuna.TrialPruned):
        hook(trainer, {})
    assert sorted(trial.storage.get_trial(trial._trial_id).intermediate_values) == list(range(1, 16))


@pytest.mark.slow
def test_two_processes_share_a_study(tmp_path):
    space, study = _space(tmp_path), tmp_path / "study"
    cmd = [sys.executable, "-m", "core.run.cli", "tune", str(space), "--study-dir", str(study), "--n-trials", "3",
           *BASE]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [r["trial"] for r in _trials(study)] == ["0", "1", "2"]
    assert len(list((study / "trials").iterdir())) == 3


BAD = {
    "unknown option": ("lrr: {low: 0.001, high: 0.01}\n", [], "unknown option 'lrr'; did you mean 'lr'?"),
    "unknown range key": ("lr: {low: 0.001, hihg: 0.01}\n", [], "did you mean 'high'?"),
    "low above high": ("lr: {low: 0.01, high: 0.001}\n", [], "must be below high"),
    "log from zero": ("lr: {low: 0, high: 0.01, log: true}\n", [], "log range needs low > 0"),
    "float on an int": ("num_epochs: {low: 1.5, high: 4}\n", [], "must be an integer"),
    "range on a switch": ("norm_adv: {low: 0, high: 1}\n", [], "give its values as choices"),
    "bad choice": ("anneal_lr: {choices: [true, maybe]}\n", [], "must be bool"),
    "edge refused": ("gamma: {low: 0.9, high: 1.5}\n", [], "gamma = 1.5 is refused"),
    "given and searched": (SPACE, ["--lr", "0.001"], "--lr is both given and searched"),
    "run dir": (SPACE, ["--run-dir", "x"], "--run-dir does not apply"),
    "not a mapping": ("- lr\n", [], "must be a mapping of option: range"),
    "searched recipe": ("recipe: {choices: [dapo]}\n", [], "cannot be searched"),
    "study dir is a file": (SPACE, [], "is a file"),
    "zero trials": (SPACE, ["--n-trials", "0"], "--n-trials must be in 1"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text, extra, expect = BAD[case]
    space, study = _space(tmp_path, text), tmp_path / "study"
    if case == "study dir is a file":
        study.write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["tune", str(space), "--study-dir", str(study), *BASE, *extra]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and expect in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_without_optuna_the_line_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    assert main(["tune", str(_space(tmp_path)), "--study-dir", str(tmp_path / "study"), *BASE]) == 2
    err = capsys.readouterr().err
    assert "pip install 'dapo-toolkit[tune]'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "study").exists()


def test_a_study_of_another_space_is_refused(tmp_path, capsys):
    import core

    study = tmp_path / "study"
    core.tune({"num_epochs": {"low": 1, "high": 2}}, study, n_trials=1, total_steps=256, num_envs=2, num_steps=128,
              num_minibatches=2, eval_episodes=1, progress=False, tensorboard=False)
    files = sorted(p.name for p in study.iterdir())
    with pytest.raises(ConfigError, match="holds a study of another space"):
        core.tune({"num_epochs": {"low": 1, "high": 3}}, study, n_trials=2, total_steps=256, num_envs=2,
                  num_steps=128, num_minibatches=2, eval_episodes=1, progress=False, tensorboard=False)
    assert sorted(p.name for p in study.iterdir()) == files
