"""Every bad input gets one line on stderr, exit 2 (a failed benchmark: non-zero), and no file created or changed:
a table of cases across dapo run / eval / dataset / bench and every algorithm family."""
import hashlib
import os
import shutil
from pathlib import Path

import pytest
import torch

from core.run.cli import main

REPO = Path(__file__).resolve().parents[1]
HUGE = str(2**70)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """Files the cases point at: a finished run, a file, a run with a checkpoint lacking a key, a corrupt one, bad
    YAML files."""
    from core.training.checkpoint import load_checkpoint, save_checkpoint

    root = tmp_path_factory.mktemp("fixtures")
    run = root / "run"
    assert main(["run", "--algo", "ppo", "--total-steps", "512", "--num-envs", "2", "--num-steps", "64",
                 "--num-minibatches", "2", "--eval-episodes", "1", "--no-progress", "--no-tensorboard",
                 "--run-dir", str(run)]) == 0
    (root / "a_file").write_text("not a directory")
    lacking = root / "lacking"
    shutil.copytree(run, lacking)
    state = load_checkpoint(run / "checkpoint.pt")
    del state["optimizer"], state["version"]
    save_checkpoint(lacking / "checkpoint.pt", state)
    corrupt = root / "corrupt"
    shutil.copytree(run, corrupt)
    (corrupt / "checkpoint.pt").write_bytes(b"\x00\x01 not a checkpoint")
    _corrupt_copies(root, run)
    (root / "binary.yaml").write_bytes(bytes(range(256)))
    (root / "kwargs.yaml").write_text("env_kwargs: 'size=5'\n")  # CartPole takes no size: refused before any file
    (root / "latin1.yaml").write_bytes("lr: 0.001 # caf\xe9\n".encode("latin-1"))
    (root / "unknown.yaml").write_text("num_epochz: 3\n")
    (root / "missing_base.yaml").write_text("base: nope.yaml\n")  # read next to the file, not in the cwd
    (root / "no_checkpoint").mkdir()
    (root / "readonly").mkdir(mode=0o555)
    return root


# a finished run's checkpoint, each edited in one place (a resume must refuse it in one line and change nothing)
CHECKPOINT_EDITS = {
    "resized": lambda s: s["actor"].update({"net.0.weight": torch.zeros(3, 3)}),
    "elapsed": lambda s: s.update(elapsed="x"), "sampler": lambda s: s.update(sampler={"junk": 1}),
    "optimizer": lambda s: s.update(optimizer={}), "step_text": lambda s: s.update(global_step="x"),
    "step_negative": lambda s: s.update(global_step=-5),
}
# checkpoint data decode() cannot turn into arrays or records (written raw, as a hostile or damaged file would be)
RAW_CHECKPOINTS = {
    "record_keyword": {"__namedtuple__": "class", "fields": ["a"], "values": [1]},
    "array_short": {"__ndarray__": b"\x00" * 3, "dtype": "<f4", "shape": [2]},
    "array_object": {"__ndarray__": b"\x00" * 8, "dtype": [["a", "O"]], "shape": [1]},
    "array_dtype_o": {"__ndarray__": b"\x00" * 8, "dtype": "|O", "shape": [1]},
}
CONFIG_DELETIONS = ("lr", "gamma", "dynamic_sampling")


def _corrupt_copies(root: Path, run: Path) -> None:
    import yaml

    from core.training.checkpoint import load_checkpoint, save_checkpoint
    for name, edit in CHECKPOINT_EDITS.items():
        shutil.copytree(run, root / name)
        edited = load_checkpoint(run / "checkpoint.pt")
        del edited["version"]
        edit(edited)
        save_checkpoint(root / name / "checkpoint.pt", edited)
    for name, payload in RAW_CHECKPOINTS.items():
        shutil.copytree(run, root / name)
        torch.save({"version": 2, "global_step": 512, "actor": payload}, root / name / "checkpoint.pt")
    for field in CONFIG_DELETIONS:
        shutil.copytree(run, root / f"no_{field}")
        saved = yaml.safe_load((run / "config.yaml").read_text())
        del saved[field]
        (root / f"no_{field}" / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    (root / "dead_end").mkdir()  # a start stopped before its first checkpoint
    shutil.copy(run / "config.yaml", root / "dead_end")
    (root / "dead_end" / ".lock").touch()


R = "{root}"  # replaced by the fixtures folder
CASES = [
    # --- dapo run, Gymnasium family
    (["run", "--seed", "-1"], "--seed must be in 0 .."),
    (["run", "--seed", HUGE], "--seed must be in 0 .."),
    (["run", "--run-dir", f"{R}/a_file"], "is a file"),
    (["run", "--run-dir", f"{R}/a_file/sub"], "lies under the file"),
    (["run", "--run-dir", "/proc/dapo_run"], "cannot"),
    (["run", "--config", f"{R}/binary.yaml"], "is not UTF-8"),
    (["run", "--config", f"{R}/latin1.yaml"], "is not UTF-8"),
    (["run", "--config", "/dev/zero"], "is not a file"),
    (["run", "--config", f"{R}/unknown.yaml"], "did you mean 'num_epochs'"),
    (["run", "--recipe", "nope"], "unknown recipe 'nope'"),
    (["run", "--hidden-sizes", "100000000"], "--hidden-sizes must be 1 to 16 widths"),
    (["run", "--lr", "inf"], "--lr must be a finite number"),
    (["run", "--lr", "nan"], "--lr must be a finite number"),
    (["run", "--ent-coef", "inf"], "--ent-coef must be a finite number"),
    (["run", "--temperature-init", "inf"], "--temperature-init must be a finite number"),
    (["run", "--temperature-lr", "nan"], "--temperature-lr must be a finite number"),
    (["run", "--eps-v-end", "inf"], "--eps-v-end must be a finite number"),
    (["run", "--divergence-factor", "inf"], "--divergence-factor must be a finite number"),
    (["run", "--collapse-significance", "nan"], "--collapse-significance must be a finite number"),
    (["run", "--checkpoint-every-s", "inf"], "--checkpoint-every-s must be a finite number"),
    (["run", "--checkpoint-every-s", "-5"], "--checkpoint-every-s must be positive"),
    (["run", "--num-envs", "100000000"], "beyond the sane limit"),
    (["run", "--num-steps", "0"], "--num-steps must be >= 1"),
    (["run", "--total-steps", "0"], "--total-steps must be in 1 .."),
    (["run", "--device", "cuda"], "CUDA is not available"),
    (["run", "--device", "tpu"], "--device must be auto, cpu, cuda or cuda:N"),
    (["run", "--algo", "nope"], "choose one of: ppo, grpo, dapo, "),
    (["run", "--env", "Nope-v0"], "unknown --env 'Nope-v0'"),
    (["run", "--env", "nosuchmod:Env-v0"], "cannot import module 'nosuchmod'"),
    (["run", "--env-kwargs", "bogus=1"], "cannot create env 'CartPole-v1'"),
    (["run", "--env-kwargs", "size"], "is not key=value"),
    (["run", "--env-kwargs", "sizes=[1,2"], "unclosed bracket (no ']')"),
    (["run", "--env-kwargs", "name='a b"], "unclosed quote"),
    (["run", "--recipe", f"{R}/missing_base.yaml"], f"recipe file {R}/nope.yaml does not exist"),
    (["run", "--log-std-init", "-1"], "--log-std-init has no effect on CartPole-v1 (classic family)"),
    (["run", "--precision", "bf16"], "--precision has no effect on CartPole-v1 (classic family)"),
    (["run", "--no-such-flag"], "unrecognized arguments: --no-such-flag (see dapo run --help)"),
    (["run", "--ext", "nope"], "unknown extension 'nope'"),
    (["run", "--ext", "noise_floor"], "acts on a Gaussian policy's noise"),
    (["run", "--ext", "kl_adaptive_lr", "target=inf"], "target must be a positive number"),
    (["run", "--ext", "kl_adaptive_lr", "target"], "write e.g. '--ext kl_adaptive_lr target=0.05'"),
    (["run", "--ext", "kl_adaptive_lr", "off", "--ext", "kl_adaptive_lr", "target=0.1"], "both turned off and given"),
    (["run", "--window", "10"], "smaller than a minibatch"),
    (["run", "--num-minibatches", "7"], "not divisible"),
    (["run", "--algo", "ppo", "--critic-lr", "0.001"], "--critic-lr has no effect with --algo ppo"),
    (["run", "--gamma", "1.5"], "--gamma must be in (0, 1]"),
    (["run", "--resume", f"{R}/run", "--total-steps", "256"], "is below the 512 steps this run has done"),
    (["run", "--resume", f"{R}/run", "--algo", "dapo"], "cannot change when resuming"),
    (["run", "--resume", f"{R}/run", "--run-dir", f"{R}/elsewhere"], "cannot be combined with --resume"),
    (["run", "--resume", f"{R}/no_checkpoint"], "not a run directory"),
    (["run", "--resume", f"{R}/lacking", "--total-steps", "1024"], "lacks 'optimizer'"),
    (["run", "--resume", f"{R}/corrupt", "--total-steps", "1024"], "unreadable or corrupt"),
    (["run", "--run-dir", f"{R}/run"], "already holds a run"),
    (["run", "--run-dir", R], "holds other files (a_file, array_dtype_o, array_object, ...); choose an empty or new"),
    (["run", "--run-dir", ""], "--run-dir is empty"),
    (["run", "--resume", f"{R}/dead_end"], "has no checkpoint to resume; start it without --resume"),
    (["run", "--config", f"{R}/kwargs.yaml"], "cannot create env 'CartPole-v1'"),
    (["run", "--env-kwargs", "wrappers=1"], "--env-kwargs wrappers is an argument of gymnasium.make"),
    *[(["run", "--resume", f"{R}/{name}", "--total-steps", "1024"], "restore it from a backup")
      for name in CHECKPOINT_EDITS],
    *[(["run", "--resume", f"{R}/{name}", "--total-steps", "1024"], "; refused") for name in RAW_CHECKPOINTS],
    *[(["eval", f"{R}/{name}"], "; refused") for name in RAW_CHECKPOINTS],
    *[(["run", "--resume", f"{R}/no_{field}"], f"config.yaml lacks '{field}'") for field in CONFIG_DELETIONS],
    *[(["eval", f"{R}/no_{field}"], f"config.yaml lacks '{field}'") for field in CONFIG_DELETIONS],
    # --- dapo recipes
    (["recipes", "nope"], "unknown recipe 'nope'; shipped recipes: atari"),
    # --- dapo eval
    (["eval", f"{R}/run", "--device", "tpu"], "--device must be"),
    (["eval", f"{R}/run", "--device", "cuda"], "CUDA is not available"),
    (["eval", f"{R}/run", "--episodes", "0"], "--episodes must be in 1 .."),
    (["eval", f"{R}/run", "--seed", "-1"], "--seed must be in 0 .."),
    (["eval", f"{R}/nowhere"], "not a run directory"),
    (["eval", f"{R}/corrupt"], "unreadable or corrupt"),
    (["eval", f"{R}/a_file"], "not a run directory"),
    # --- dapo run, PettingZoo family
    (["run", "--algo", "mappo", "--seed", "-1"], "--seed must be in 0 .."),
    (["run", "--algo", "mappo", "--lr", "nan"], "--lr must be a finite number"),
    (["run", "--algo", "maddpg", "--dynamic-sampling"], "--dynamic-sampling has no effect with --algo maddpg"),
    (["run", "--algo", "maddpg", "--clip-eps", "0.1"], "--clip-eps has no effect with --algo maddpg"),
    (["run", "--algo", "mappo", "--tau", "0.05"], "--tau has no effect with --algo mappo"),
    (["run", "--algo", "mappo", "--env-kwargs", "max_cycles=0"], "max_cycles=0 must be >= 1"),
    (["run", "--env", "simple_sprad_v3"], "simple_spread_v3"),
    (["run", "--algo", "dapo-ma", "--num-envs", "100000000"], "beyond the sane limit"),
    (["run", "--algo", "dapo-ma", "--device", "cuda"], "CUDA is not available"),
    # --- dapo run, Decision Transformer family
    (["run", "--algo", "dt"], "--dataset NAME is required"),
    (["run", "--algo", "dt", "--dataset", "none/none-v0"], "no local Minari dataset 'none/none-v0'"),
    (["run", "--algo", "dt", "--dataset", "none/none-v0", "--adv-temperature", "2"], "has no effect with --algo dt"),
    (["run", "--algo", "dapo-dt", "--dataset", "x/y-v0", "--lr", "inf"], "--lr must be a finite number"),
    (["run", "--algo", "dapo-dt", "--dataset", "x/y-v0", "--seed", HUGE], "--seed must be in 0 .."),
    (["run", "--algo", "dapo-dt", "--dataset", "x/y-v0", "--device", "cuda"], "CUDA is not available"),
    # --- dapo dataset
    (["dataset", "collect", "--env", "ALE/Pong-v5", "--policy", f"{R}/run", "--steps", "100", "--name", "pong/test-v0",
      "--num-envs", "100000000"], "--num-envs must be in 1 .."),
    (["dataset", "collect", "--env", "ALE/Pong-v5", "--policy", f"{R}/run", "--steps", "0", "--name", "pong/test-v0"],
     "--steps must be in 1 .."),
    (["dataset", "collect", "--env", "ALE/Pong-v5", "--policy", f"{R}/run", "--steps", "100", "--name", "bad_name"],
     "is not a Minari dataset id"),
    (["dataset", "collect", "--env", "CartPole-v1", "--policy", f"{R}/run", "--steps", "100", "--name", "pong/test-v0"],
     "datasets are made for Atari ids"),
    (["dataset", "collect", "--env", "ALE/Pong-v5", "--policy", f"{R}/run", "--steps", "100", "--name", "pong/test-v0"],
     "was trained on CartPole-v1"),
    (["dataset", "info", "none/none-v0"], "no local Minari dataset"),
    # --- dapo bench (non-zero exit, one line)
    (["bench", "mujoco", "--jobs", "0"], "must be >= 1"),
    (["bench", "mujoco", "--envs", "Nope-v0", "--runs-dir", "relative_runs"], "unknown --env 'Nope-v0'"),
    (["bench", "mujoco", "--seeds", "-1"], "must be in 0 .."),
    (["bench", "mujoco", "--variants", "nope"], "unknown variants"),
    (["bench", "ma", "--steps", "-1"], "must be >= 1"),
    (["bench", "ma", "--seeds", "0"], "must be >= 1"),
    (["bench", "dt", "--data", "ALE/Pong-v5=none/none-v0", "--runs-dir", "relative_runs"], "no local Minari dataset"),
    (["bench", "dt", "--data", "Pong"], "ENV=DATASET"),
    (["bench", "sparse", "--tasks", "MiniGrid-Nope-v0"], "unknown tasks"),
    (["bench", "sparse", "--variants", "nope"], "unknown variants"),
    (["bench", "sparse", "--seeds", "-1"], "must be in 0 .."),
    (["bench", "throughput", "--total-steps", "0"], "must be >= 1"),
    (["bench", "throughput", "--parts", "xyz"], "--parts must be letters of abcd"),
    (["bench", "nope"], "unknown benchmark 'nope'"),
]


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(d.rglob("*"))}


@pytest.mark.parametrize("argv,expect", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_gives_one_line_and_touches_nothing(fixtures, tmp_path, monkeypatch, capsys, argv, expect):
    monkeypatch.chdir(tmp_path)  # relative paths land here if anything is written
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    argv, expect = [a.replace(R, str(fixtures)) for a in argv], expect.replace(R, str(fixtures))
    before, repo_before = _tree(fixtures), sorted(os.listdir(REPO))
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2 or (argv[0] == "bench" and code not in (0, None)), (code, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert expect in err, err
    assert _tree(fixtures) == before, "a fixture was changed"
    assert list(tmp_path.iterdir()) == [], f"created: {list(tmp_path.iterdir())}"
    assert sorted(os.listdir(REPO)) == repo_before, "created something in the repository"


def test_the_table_covers_every_command_and_family():
    assert len(CASES) >= 60
    commands = {c[0][0] for c in CASES}
    assert commands == {"run", "eval", "recipes", "dataset", "bench"}
    algos = {c[0][c[0].index("--algo") + 1] for c in CASES if "--algo" in c[0]}
    assert {"ppo", "mappo", "maddpg", "dapo-ma", "dt", "dapo-dt"} <= algos


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_run_directory_is_refused(fixtures, capsys):
    assert main(["run", "--run-dir", str(fixtures / "readonly" / "r")]) == 2
    assert "is not writable" in capsys.readouterr().err
