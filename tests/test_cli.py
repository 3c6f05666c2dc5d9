"""`dapo` command line: help, error cases (one line, exit 2, nothing overwritten), eval of a saved run."""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.run.cli import main

REPO = Path(__file__).resolve().parents[1]


def _one_line_error(capsys, argv, expect: str):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    assert expect in err, err
    return err


def _usage_error(capsys, argv, expect: str):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2
    assert len(err.splitlines()) == 1 and expect in err, err


def test_help_documents_every_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--env", "--algo", "--total-steps", "--seed", "--num-envs", "--device", "--run-dir", "--config",
                 "--recipe", "--resume", "--clip-eps-high", "--eps-v-start", "--temperature-mode", "--window",
                 "--[no-]importance-correction", "--policy-lr-drop-step", "--[no-]health-monitors", "--ext"):
        assert flag in out
    for algo in ("ppo, grpo, dapo", "ippo, mappo, dapo-ma, maddpg", "dt, dapo-dt"):  # every family's algorithms
        assert algo in out
    for group in ("experiment:", "rollout:", "optimisation:", "clipping:", "sampler:", "health:", "extensions:",
                  "runtime:"):
        assert group in out
    assert len(out.splitlines()) <= 150


def test_help_fits_150_lines_for_every_family(capsys):
    for algo in ("dapo", "mappo", "dapo-dt"):
        with pytest.raises(SystemExit):
            main(["run", "--algo", algo, "--help"])
        out = capsys.readouterr().out
        assert "usage: dapo run" in out and len(out.splitlines()) <= 150, (algo, len(out.splitlines()))


def test_unknown_env_suggests_close_matches(capsys, tmp_path):
    err = _one_line_error(capsys, ["run", "--env", "CartPol-v1", "--run-dir", str(tmp_path / "r")], "unknown --env")
    assert "CartPole-v1" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv,expect", [
    (["--algo", "foo"], "unknown --algo 'foo'"),
    (["--clip-eps", "0"], "--clip-eps must be positive"),
    (["--clip-eps", "-0.1"], "--clip-eps must be positive"),
    (["--temperature-init", "-1"], "--temperature-init must be positive"),
    (["--window", "10"], "smaller than a minibatch"),
    (["--num-minibatches", "7"], "not divisible"),
    (["--gamma", "1.5"], "--gamma must be in (0, 1]"),
    (["--device", "tpu"], "--device must be"),
    (["--ext", "kl_adaptive_lr", "target=-0.1"], "target must be a positive number"),
    (["--ext", "kl_adaptive_lr", "max_scale=0.5"], "max_scale must be at least 1"),
    (["--ext", "kl_adaptive_lr", "targe=0.1"], "unknown option 'targe'; did you mean 'target'"),
    (["--ext", "noise_flor"], "unknown extension 'noise_flor'; did you mean 'noise_floor'"),
    (["--hidden-sizes", "64", "0"], "--hidden-sizes must be 1 to 16 widths"),
    (["--lr", "-inf"], "--lr must be a finite number"),
    (["--lr", "nan"], "--lr must be a finite number"),
])
def test_invalid_hyper_parameters(capsys, tmp_path, argv, expect):
    _one_line_error(capsys, ["run", "--run-dir", str(tmp_path / "r"), *argv], expect)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv,expect", [
    (["--total-steps", "abc"], "invalid int value"),
    (["--temperature-mode", "hot"], "invalid choice"),
    (["--no-such-flag"], "unrecognized arguments"),
])
def test_malformed_flags(capsys, argv, expect):
    _usage_error(capsys, ["run", *argv], expect)


@pytest.mark.parametrize("spelling", [["--lr", "-inf"], ["--lr=-inf"]])
def test_minus_infinity_reads_as_a_value_in_either_spelling(capsys, tmp_path, spelling):
    """`--lr -inf` would otherwise be taken for an unknown option; read as a value, it is refused as not finite."""
    _one_line_error(capsys, ["run", *spelling, "--run-dir", str(tmp_path / "r")], "--lr must be a finite number")


@pytest.mark.parametrize("content,expect", [
    (None, "does not exist"),
    ("a: [1,", "not valid YAML"),
    ("- 1\n- 2\n", "must be a mapping"),
    ("totl_steps: 5\n", "did you mean 'total_steps'"),
    ("total_steps: many\n", "must be int"),
    ("hidden_sizes: [64, x]\n", "list of ints"),
])
def test_bad_config_files(capsys, tmp_path, content, expect):
    path = tmp_path / "cfg.yaml"
    if content is not None:
        path.write_text(content)
    _one_line_error(capsys, ["run", "--config", str(path), "--run-dir", str(tmp_path / "r")], expect)


def _digest(run_dir: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run_dir.iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One tiny finished run, shared by the tests below (each copies what it corrupts)."""
    run_dir = tmp_path_factory.mktemp("run") / "r"
    cfg = tmp_path_factory.mktemp("cfg") / "tiny.yaml"
    cfg.write_text("total_steps: 512\nnum_envs: 2\nnum_steps: 64\nnum_minibatches: 2\neval_episodes: 2\n"
                   "progress: false\ntensorboard: false\n")
    assert main(["run", "--config", str(cfg), "--run-dir", str(run_dir), "--algo", "ppo"]) == 0
    return run_dir


def test_run_writes_outputs_and_yaml_config_applies(finished_run):
    import json
    import yaml

    for name in ("config.yaml", "metrics.csv", "checkpoint.pt", "summary.json", "learning_curve.png"):
        assert (finished_run / name).is_file(), name
    summary = json.loads((finished_run / "summary.json").read_text())
    for key in ("env", "algo", "seed", "total_steps", "wall_time_s", "sps", "final_return_mean",
                "eval_return_mean", "eval_return_std", "health_events"):
        assert key in summary
    assert summary["algo"] == "ppo" and summary["total_steps"] == 512
    saved = yaml.safe_load((finished_run / "config.yaml").read_text())
    assert saved["num_envs"] == 2 and saved["gae_lambda"] == 0.8  # YAML value and classic preset resolved


def test_existing_run_dir_is_not_overwritten(capsys, finished_run):
    before = _digest(finished_run)
    _one_line_error(capsys, ["run", "--run-dir", str(finished_run)], "already holds a run")
    assert _digest(finished_run) == before


def test_resume_refuses_to_change_the_algorithm(capsys, finished_run):
    before = _digest(finished_run)
    _one_line_error(capsys, ["run", "--resume", str(finished_run), "--algo", "dapo"], "cannot change when resuming")
    assert _digest(finished_run) == before


@pytest.mark.parametrize("floor_flags,has_floor", [([], True), (["--ext", "noise_floor", "off"], False)])
def test_resume_keeps_the_runs_noise_floor(tmp_path, floor_flags, has_floor):
    """A resumed run keeps the extensions it started with: resume reads config.yaml as it is, so a run started
    without the dapo-mujoco recipe's noise floor does not get it back."""
    import yaml

    run_dir = tmp_path / "r"
    tiny = ["--env", "Pendulum-v1", "--algo", "dapo", "--recipe", "dapo-mujoco", "--num-steps", "64", "--num-minibatches", "2",
            "--eval-episodes", "1", "--no-progress", "--no-tensorboard"]
    assert main(["run", *tiny, *floor_flags, "--total-steps", "64", "--run-dir", str(run_dir)]) == 0
    assert main(["run", "--resume", str(run_dir), "--total-steps", "128", "--no-progress"]) == 0
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert ("noise_floor" in saved["extensions"], saved["total_steps"]) == (has_floor, 128)


def test_corrupt_checkpoint(capsys, finished_run, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(finished_run, broken)
    (broken / "checkpoint.pt").write_bytes(b"not a checkpoint")
    before = _digest(broken)
    _one_line_error(capsys, ["run", "--resume", str(broken), "--total-steps", "1024"], "unreadable or corrupt")
    _one_line_error(capsys, ["eval", str(broken)], "unreadable or corrupt")
    assert _digest(broken) == before
    _one_line_error(capsys, ["eval", str(tmp_path / "nowhere")], "not a run directory")


def test_eval_prints_mean_and_std(capsys, finished_run):
    assert main(["eval", str(finished_run), "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert "eval_return_mean" in out and "over 3 episodes" in out
    assert main(["eval", str(finished_run), "--episodes", "1"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("over 1 episode")


def test_errors_exit_2_without_traceback_as_a_process(tmp_path):
    """The installed entry point, end to end: one stderr line, exit code 2."""
    proc = subprocess.run([sys.executable, "-m", "core", "run", "--env", "Nope-v0", "--run-dir", str(tmp_path / "x")],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_multi_agent_runs_route_to_dapo_ma(capsys, tmp_path):
    """An MPE env or a multi-agent algo selects the multi-agent options, runner and evaluation."""
    from core.run.cli import pick_family
    from core.run.registry import plugins

    def family(argv):
        return pick_family(argv, plugins()).name

    assert family(["run", "--env", "simple_spread_v3"]) == "PettingZoo"
    assert family(["run", "--algo=mappo"]) == "PettingZoo"
    assert family(["run", "--env", "CartPole-v1"]) == "Gymnasium" and family(["run"]) == "Gymnasium"
    assert family(["run", "--algo", "dapo-dt"]) == "Decision Transformer"
    _one_line_error(capsys, ["run", "--env", "simple_sprea_v3", "--run-dir", str(tmp_path / "x")], "simple_spread_v3")
    run_dir = tmp_path / "ma"
    assert main(["run", "--env", "simple_spread_v3", "--algo", "ippo", "--total-steps", "800", "--num-envs", "4",
                 "--run-dir", str(run_dir), "--no-progress", "--no-tensorboard", "--eval-episodes", "1"]) == 0
    assert family(["run", "--resume", str(run_dir)]) == "PettingZoo" and family(["eval", str(run_dir)]) == "PettingZoo"
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    assert "over 2 episodes" in capsys.readouterr().out


def test_bench_names_the_benchmarks_and_hands_flags_to_the_script(capsys, tmp_path, monkeypatch):
    assert main(["bench"]) == 2
    assert "usage: dapo bench {mujoco,throughput" in capsys.readouterr().err
    assert main(["bench", "mujocco"]) == 2
    assert "unknown benchmark 'mujocco'; choose one of: mujoco" in capsys.readouterr().err
    assert main(["bench", "mujoco", "--help"]) == 0  # the script runs in its own process (core imports no experiments)
    assert "usage: dapo bench mujoco" in capsys.readouterr().out
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))  # the script's own flags reach its own checks
    assert main(["bench", "dt-predictability", "--datasets", "pong/none-v0", "--out", str(tmp_path / "o")]) == 2
    assert "no local Minari dataset 'pong/none-v0'" in capsys.readouterr().err


def test_progress_lines_when_the_output_is_not_a_terminal(tmp_path):
    """Piped (a batch job's log), the run prints a plain progress line every --progress-every-s seconds, and the start
    line says when --total-steps is rounded up to whole rollouts."""
    proc = subprocess.run([sys.executable, "-m", "core", "run", "--total-steps", "20000", "--progress-every-s", "0.2",
                           "--run-dir", str(tmp_path / "r"), "--no-tensorboard", "--eval-episodes", "1"],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("dapo CartPole-v1: step ")]
    assert len(lines) >= 3, proc.stdout
    assert "SPS" in lines[0] and "elapsed" in lines[0] and lines[-1].startswith("dapo CartPole-v1: step 20224/20224")
    assert "training for 20224 env steps (--total-steps 20000 rounded up to whole iterations of 256)" in proc.stdout


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_live_bar_keeps_its_numbers_on_narrow_terminals(width):
    """The description and the bar shrink first; the step counts, SPS, return and ETA always show in full."""
    import io

    from rich.console import Console
    from rich.progress import Progress as RichProgress

    from core.training.logging import bar_columns

    console = Console(width=width, force_terminal=True, color_system=None, record=True, file=io.StringIO())
    bar = RichProgress(*bar_columns(), expand=True, console=console)
    bar.add_task("dapo MiniGrid-DoorKey-5x5-v0", total=100096, completed=20224, sps=556.0, ret="     0.9")
    console.print(bar.make_tasks_table(bar.tasks))
    line = console.export_text().rstrip("\n")
    assert len(line) <= width and "20224/100096" in line and "SPS  556 return      0.9" in line and "ETA" in line


def test_plain_progress_prints_the_final_line_once():
    import io

    from core.training.logging import Progress

    out = io.StringIO()
    p = Progress(total=256, start=0, description="ppo CartPole-v1", every_s=10.0, stream=out)
    p.update(256, 1000.0, 20.0)  # a one-iteration run: the first update is already the last
    p.close()
    assert out.getvalue().count("step 256/256") == 1, out.getvalue()


HEAVY = ("torch", "gymnasium", "numpy", "transformers", "optuna", "mujoco")
ARGVS = (["--help"], ["run", "--help"], ["run", "--algo", "mappo", "--help"], ["tune", "--help"], ["eval", "--help"],
         ["compare", "--help"], ["run", "--lr", "x"], ["nope"])


def test_help_and_argument_errors_import_no_torch():
    """Issue #58 rough edge 6: every dapo command took ~3.5 s to start, --help too, because building the parser
    imported torch (through the checkpoint module, the extensions and the families' packages)."""
    import json

    script = ("import json, sys\nfrom core.run.cli import main\nout = {}\n"
              f"for argv in {ARGVS!r}:\n"
              "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
              f"    out[' '.join(argv)] = [m for m in {HEAVY!r} if m in sys.modules]\n"
              "print(json.dumps(out))\n")
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", script], cwd=repo, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == {" ".join(argv): [] for argv in ARGVS}, loaded
