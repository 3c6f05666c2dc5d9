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
    _edge_fixtures(root, run)
    return root


DEEP = "[" * 20_000 + "]" * 20_000  # parsers recurse once per level: RecursionError unless the depth is limited
MA_TINY = ["--env-kwargs", "N=2 max_cycles=25", "--num-envs", "2", "--eval-episodes", "1", "--no-progress",
           "--no-tensorboard"]


def _edge_fixtures(root: Path, run: Path) -> None:
    """Issue #57's inputs at the edges: deep nesting, long recipe chains, huge values, stale locks, damaged per-agent
    checkpoints, checkpoints whose unpickling would run code."""
    from core.training.checkpoint import load_checkpoint, save_checkpoint
    (root / "deep_value.yaml").write_text(f"env_kwargs: {DEEP}\n")
    (root / "deep_block.yaml").write_text("env_kwargs:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(400)))
    chain = root / "chain"
    chain.mkdir()
    for i in range(3000):
        (chain / f"c{i}.yaml").write_text(f"base: c{i + 1}.yaml\n" if i < 2999 else "lr: 0.001\n")
    (root / "wide.yaml").write_text("hidden_sizes: [" + ",".join(["1"] * 300_000) + "]\n")
    deep_config = root / "deep_config"
    shutil.copytree(run, deep_config)
    text = (run / "config.yaml").read_text()
    (deep_config / "config.yaml").write_text("\n".join(f"lr: {DEEP}" if line.startswith("lr:") else line
                                                       for line in text.splitlines()) + "\n")
    for name, edit in (("stale_lock", None), ("stale_lock_resized", CHECKPOINT_EDITS["resized"])):
        shutil.copytree(run, root / name)
        (root / name / ".lock").write_text("12345")  # the pid of the run's last writer, long gone
        if edit is not None:
            state = load_checkpoint(run / "checkpoint.pt")
            del state["version"]
            edit(state)
            save_checkpoint(root / name / "checkpoint.pt", state)
    for name, (fn, args) in {"runs_code": (os.system, ("true",)), "runs_code2": (shutil.rmtree, ("/nowhere",))}.items():
        shutil.copytree(run, root / name)
        torch.save({"version": 2, "global_step": 512, "actor": _Reduce(fn, args)}, root / name / "checkpoint.pt")
    # multi-agent runs whose per-agent clip scales were damaged (one too many; NaN)
    for algo in ("dapo-maddpg", "dapo-ma"):
        ma = root / f"ma_{algo}"
        extra = ["--batch-size", "32", "--learning-starts", "100"] if algo == "dapo-maddpg" else ["--num-epochs", "1"]
        assert main(["run", "--algo", algo, "--total-steps", "200", *MA_TINY, *extra, "--run-dir", str(ma)]) == 0
        for damage, edit in {"long": lambda v: torch.cat([v, v[:1]]), "nan": lambda v: torch.full_like(v, float("nan"))
                             }.items():
            shutil.copytree(ma, root / f"ma_{algo}_{damage}")
            state = load_checkpoint(ma / "checkpoint.pt")
            del state["version"]
            state["clips"]["pi_scale"] = edit(state["clips"]["pi_scale"])
            save_checkpoint(root / f"ma_{algo}_{damage}" / "checkpoint.pt", state)


class _Reduce:
    """Pickles as a call of ``fn(*args)``: what a hostile checkpoint holds."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


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
    (["run", "--hidden-sizes", "32", "--hidden-sizes", "64"], "--hidden-sizes given twice; give all its values after one"),
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
    # --- issue #57: inputs at the edges. Deep nesting (parsers recurse once per level)
    (["run", "--env-kwargs", f"x={DEEP}"], "nests lists or mappings more than 32 deep"),
    (["run", "--algo", "mappo", "--env-kwargs", f"x={DEEP}"], "nests lists or mappings more than 32 deep"),
    (["run", "--ext", "kl_adaptive_lr", f"target={DEEP}"], "nests lists or mappings more than 32 deep"),
    (["run", "--recipe", f"{R}/deep_value.yaml"], "nests lists or mappings more than 32 deep"),
    (["run", "--recipe", f"{R}/deep_block.yaml"], "nests lists or mappings more than 32 deep"),
    (["run", "--resume", f"{R}/deep_config", "--total-steps", "1024"], "nests lists or mappings more than 32 deep"),
    (["eval", f"{R}/deep_config"], "nests lists or mappings more than 32 deep"),
    (["run", "--recipe", f"{R}/chain/c0.yaml"], "applies more than 16 recipes inside each other"),
    (["recipes", f"{R}/chain/c0.yaml"], "applies more than 16 recipes inside each other"),
    # settings under which MADDPG would never train
    (["run", "--algo", "maddpg", "--total-steps", "1000", "--learning-starts", "5000"], "the run would never update"),
    (["run", "--algo", "dapo-maddpg", "--total-steps", "2000", "--learning-starts", "2000"], "would never update"),
    (["run", "--algo", "maddpg", "--batch-size", "10000000"], "is larger than the replay buffer"),
    (["run", "--algo", "dapo-maddpg", "--batch-size", "4096", "--buffer-size", "1000"], "larger than the replay buffer"),
    (["run", "--algo", "maddpg", "--total-steps", "500", "--learning-starts", "0"], "would never hold a batch"),
    # sizes without bounds: checked against what the run needs before anything is allocated or made
    (["run", "--algo", "maddpg", "--env-kwargs", "N=50", "--buffer-size", "100000000"], "more than the"),
    (["run", "--algo", "dapo-maddpg", "--env-kwargs", "N=50", "--buffer-size", "10000000"], "GiB of memory available"),
    (["run", "--algo", "dapo-ma", "--env-kwargs", "N=100000000"], "N=100000000 is beyond the sane limit of 100"),
    (["run", "--algo", "mappo", "--env-kwargs", "max_cycles=10000000000"], "is beyond the sane limit"),
    (["run", "--recipe", f"{R}/wide.yaml"], "'hidden_sizes' has 300000 entries; at most 10000"),
    (["run", "--env-kwargs", "x=[" + "1," * 400_000 + "]"], "cannot create env 'CartPole-v1'"),
    # small ones
    (["run", "--run-dir", f"{R}/{'x' * 300}"], "bytes long; the file system allows 255"),
    (["run", "--run-dir", f"{R}/{'y' * 300}/sub"], "bytes long; the file system allows 255"),
    (["run", "--resume", f"{R}/stale_lock", "--total-steps", "256"], "is below the 512 steps this run has done"),
    (["run", "--resume", f"{R}/stale_lock_resized", "--total-steps", "1024"], "restore it from a backup"),
    (["bench"], "name a benchmark"),
    (["run", "--resume", f"{R}/runs_code", "--total-steps", "1024"], "could run code"),
    (["eval", f"{R}/runs_code2"], "could run code"),
    (["run", "--env", "MiniGrid-Empty-5x5-v0", "--env-kwargs", "max_steps=0"], "max_steps=0 must be >= 1"),
    (["run", "--env", "MiniGrid-Empty-5x5-v0", "--env-kwargs", "size=100000"], "size=100000 is beyond the sane limit"),
    # damaged per-agent checkpoint contents that pass the unpickling guard
    *[(["run", "--resume", f"{R}/ma_{algo}_{damage}", "--total-steps", "400"], expect)
      for algo in ("dapo-maddpg", "dapo-ma")
      for damage, expect in (("long", "clips.pi_scale has shape (3,), not (2,)"),
                             ("nan", "clips.pi_scale holds NaN or infinite values"))],
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
    assert len(err) <= 1000, f"an error line of {len(err)} characters"
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


# --- a full disk (issue #57): RLIMIT_FSIZE makes every write to a file fail with EFBIG (SIGXFSZ is ignored by Python),
# as a full disk fails it with ENOSPC; in a subprocess, so that the limit binds nothing else
FULL_DISK = """
import resource, sys, tempfile
tempfile.tempdir = tempfile.gettempdir()  # found before the limit (torch's imports ask for it): /tmp on another disk
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from core.run.cli import main
sys.exit(main(sys.argv[1:]))
"""
TINY_RUN = ["--algo", "ppo", "--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--eval-episodes", "1",
            "--no-progress"]


def _on_full_disk(argv, limit=0, cwd=None):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", FULL_DISK.format(limit=limit), *map(str, argv)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)
    return done.returncode, done.stderr.strip()


def test_a_disk_full_at_the_start_is_one_line_and_leaves_nothing(tmp_path):
    code, err = _on_full_disk(["run", *TINY_RUN, "--total-steps", "512", "--run-dir", tmp_path / "new" / "run"])
    assert code == 1 and len(err.splitlines()) == 1 and "no space left" in err, err
    assert list(tmp_path.iterdir()) == [], "the lock or the run directory was left behind"


def test_a_resume_on_a_full_disk_is_one_line_and_changes_nothing(fixtures, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(fixtures / "stale_lock", run)
    before = _tree(run)
    code, err = _on_full_disk(["run", "--resume", run, "--total-steps", "1024"])
    assert code == 1 and len(err.splitlines()) == 1 and "no space left" in err, err
    assert _tree(run) == before, "a file of the refused run was changed (its lock included)"


def test_a_disk_filling_in_the_middle_of_a_run_is_one_line_and_keeps_the_checkpoint(tmp_path, monkeypatch, capsys):
    """TensorBoard's writer thread meets the full disk first: its error reaches the trainer at the next scalar, and
    closing the writer (which fails too) must not replace the one line with a traceback."""
    import errno

    from tensorboard.summary.writer import record_writer

    from core.training.checkpoint import load_checkpoint

    write, calls = record_writer.RecordWriter.write, []

    def filling(self, data):
        calls.append(1)
        if len(calls) > 40:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(self, data)
    monkeypatch.setattr(record_writer.RecordWriter, "write", filling)
    run = tmp_path / "run"
    code = main(["run", *TINY_RUN, "--total-steps", "4096", "--checkpoint-every-s", "0.01", "--run-dir", str(run)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "no space left" in err, err
    monkeypatch.undo()
    state = load_checkpoint(run / "checkpoint.pt")
    assert 0 < state["global_step"] < 4096
    assert main(["run", "--resume", str(run), "--no-progress"]) == 0
