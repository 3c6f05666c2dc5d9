"""--wandb: the scalars TensorBoard gets and the config go to a W&B run (W&B's offline mode: nothing leaves the machine);
without the wandb package, --wandb is refused in one line before any file is made, in every family."""
import sys
import types

import pytest

from core.run.cli import main
from core.training.logging import MetricLogger


class FakeRun:
    def __init__(self, **kwargs):
        self.init, self.logged, self.metrics, self.exit_code = kwargs, [], [], None

    def define_metric(self, name, **kwargs):
        self.metrics.append((name, kwargs))

    def log(self, row):
        self.logged.append(row)

    def finish(self, exit_code=0):
        self.exit_code = exit_code


@pytest.fixture
def fake_wandb(monkeypatch):
    module = types.SimpleNamespace(runs=[], Settings=lambda **kw: kw)

    def init(**kwargs):
        module.runs.append(FakeRun(**kwargs))
        return module.runs[-1]
    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module


def test_logger_sends_the_tensorboard_scalars_and_the_config(fake_wandb, tmp_path):
    from core.config.options import TrainConfig

    (tmp_path / "config.yaml").write_text("algo: dapo\nenv: CartPole-v1\n")
    cfg = TrainConfig(wandb=True, wandb_project="p", wandb_group="g", wandb_mode="offline")
    logger = MetricLogger(tmp_path, tensorboard=False, wandb=cfg)
    logger.log(64, {"rollout/ep_return_mean": 12.5, "train/loss": float("nan"), "note": "text"})
    logger.log(128, {"rollout/ep_return_mean": 20.0, "train/loss": 0.5, "note": "text"})
    logger.close()
    run = fake_wandb.runs[0]
    assert run.init["project"] == "p" and run.init["group"] == "g" and run.init["mode"] == "offline"
    assert run.init["config"] == {"algo": "dapo", "env": "CartPole-v1"} and run.init["name"] == tmp_path.name
    assert run.logged == [{"global_step": 64, "rollout/ep_return_mean": 12.5},  # NaN and text: not TensorBoard's either
                          {"global_step": 128, "rollout/ep_return_mean": 20.0, "train/loss": 0.5}]
    assert ("*", {"step_metric": "global_step"}) in run.metrics and run.exit_code == 0
    assert MetricLogger(tmp_path, tensorboard=False, wandb=TrainConfig()).wandb is None  # --wandb off: no W&B run


@pytest.mark.parametrize("algo", ["dapo", "mappo", "dt", "dapo-lm"])
def test_wandb_without_the_package_is_one_line_exit_2_and_makes_nothing(algo, monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb fails; find_spec says it is absent
    run_dir = tmp_path / "run"
    assert main(["run", "--algo", algo, "--wandb", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--wandb needs the wandb package" in err[0], err
    assert not run_dir.exists()


def test_bad_wandb_mode_is_refused(capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:  # argparse's choices
        main(["run", "--wandb-mode", "cloud", "--run-dir", str(tmp_path / "r")])
    assert exited.value.code == 2 and "--wandb-mode: invalid choice" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_offline_run_end_to_end(monkeypatch, tmp_path):
    pytest.importorskip("wandb")
    wandb_dir = tmp_path / "wandb_dir"
    wandb_dir.mkdir()
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(wandb_dir))
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    assert main(["run", "--algo", "ppo", "--total-steps", "256", "--num-envs", "2", "--num-steps", "64",
                 "--eval-episodes", "0", "--no-progress", "--no-tensorboard", "--wandb", "--wandb-mode", "offline",
                 "--wandb-project", "dapo-test", "--run-dir", str(run_dir)]) == 0
    runs = list(wandb_dir.glob("wandb/offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("run-*.wandb")), list(wandb_dir.rglob("*"))
    assert not list(run_dir.glob("wandb"))  # WANDB_DIR took the files
