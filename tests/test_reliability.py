"""Safe, crash-proof runs: hostile checkpoints run no code, one writer per run directory, SIGKILL then --resume equals
an uninterrupted run, a full disk keeps the last checkpoint. (The table of bad inputs: tests/test_bad_inputs.py.)"""
import csv
import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
MARKER_ENV = "DAPO_TEST_MARKER"


class Payload:
    """Pickled, its ``__reduce__`` would create a file when unpickled: the proof that a loader ran code."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def _dapo(*args, cwd=None, env=None, check=False, timeout=600, preexec_fn=None):
    proc = subprocess.run([sys.executable, "-m", "core", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout, env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
                          preexec_fn=preexec_fn)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _one_line(proc, code=2, expect=""):
    err = proc.stderr.strip()
    assert proc.returncode == code, (proc.returncode, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert expect in err, err
    return err


def _digest(d: Path) -> dict:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()}


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in csv.DictReader(f)]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "cartpole"
    _dapo("run", "--algo", "ppo", "--total-steps", "512", "--num-envs", "2", "--num-steps", "64", "--num-minibatches",
          "2", "--eval-episodes", "1", "--no-progress", "--no-tensorboard", "--run-dir", run, check=True)
    return run


def _hostile(run: Path, tmp_path: Path, name: str = "checkpoint.pt") -> tuple[Path, Path]:
    hostile = tmp_path / "hostile"
    shutil.copytree(run, hostile)
    marker = tmp_path / "code_ran"
    (hostile / name).parent.mkdir(exist_ok=True)
    torch.save({"version": 2, "global_step": 512, "actor": Payload(marker)}, hostile / name)
    return hostile, marker


def test_a_hostile_checkpoint_is_refused_by_eval_and_resume(tiny_run, tmp_path):
    hostile, marker = _hostile(tiny_run, tmp_path)
    before = _digest(hostile)
    _one_line(_dapo("eval", hostile), expect="holds objects other than tensors and plain data; refused")
    _one_line(_dapo("run", "--resume", hostile, "--total-steps", "1024"), expect="refused")
    assert not marker.exists() and _digest(hostile) == before


def test_a_hostile_policy_is_refused_by_dataset_collect(tiny_run, tmp_path):
    """dapo dataset collect --policy RUN (or a snapshot in it) loads a checkpoint too: no code runs there either."""
    import yaml

    atari = tmp_path / "atari"
    atari.mkdir()
    saved = yaml.safe_load((tiny_run / "config.yaml").read_text())
    (atari / "config.yaml").write_text(yaml.safe_dump({**saved, "env": "ALE/Pong-v5", "precision": "fp32"}))
    marker = tmp_path / "code_ran"
    torch.save({"version": 2, "global_step": 1, "actor": Payload(marker)}, atari / "checkpoint.pt")
    (atari / "snapshots").mkdir()
    torch.save({"version": 1, "actor": Payload(marker)}, atari / "snapshots" / "step_000000001.pt")
    env = {"MINARI_DATASETS_PATH": str(tmp_path / "datasets")}
    for policy in (atari, atari / "snapshots" / "step_000000001.pt"):
        proc = _dapo("dataset", "collect", "--env", "ALE/Pong-v5", "--policy", policy, "--steps", "100", "--name",
                     "pong/test-v0", env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not marker.exists() and not (tmp_path / "datasets").exists()


def test_a_hostile_snapshot_and_first_format_tricks_are_refused(tmp_path):
    """A version-1 checkpoint may hold NumPy arrays (an allow-list loads them) but never anything else."""
    import numpy as np

    from core.training.checkpoint import load_checkpoint
    from core.config.errors import ConfigError
    marker = tmp_path / "code_ran"
    torch.save({"version": 1, "obs_norm": {"mean": np.zeros(3)}, "evil": Payload(marker)}, tmp_path / "v1.pt")
    with pytest.raises(ConfigError, match="refused"):
        load_checkpoint(tmp_path / "v1.pt")
    assert not marker.exists()
    torch.save({"version": 1, "obs_norm": {"mean": np.arange(3.0)}, "rollouts": {"collector": {"envs": b"\x80junk"}}},
               tmp_path / "v1_ok.pt")
    with pytest.warns(UserWarning, match="loaded without its pickled environments"):
        state = load_checkpoint(tmp_path / "v1_ok.pt")
    assert state["obs_norm"]["mean"].tolist() == [0.0, 1.0, 2.0] and state["rollouts"]["collector"]["envs"] is None


def test_checkpoints_round_trip_plain_data_and_refuse_objects(tmp_path):
    from collections import deque, namedtuple

    import numpy as np

    from core.training.checkpoint import load_checkpoint, save_checkpoint
    Rec = namedtuple("Rec", "obs adv")
    state = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.float64(1.5), "c": deque([1, 2]),
             "d": Rec(torch.ones(2), np.int64(3)), "e": (1, None, "x", b"y"), "rng": np.random.get_state()}
    save_checkpoint(tmp_path / "c.pt", state)
    back = load_checkpoint(tmp_path / "c.pt")
    assert back["a"].dtype == np.float32 and back["a"].tolist() == state["a"].tolist() and back["b"] == 1.5
    assert back["c"] == [1, 2] and back["d"].adv == 3 and torch.equal(back["d"].obs, torch.ones(2))
    assert back["e"] == (1, None, "x", b"y") and np.array_equal(back["rng"][1], state["rng"][1])
    with pytest.raises(TypeError, match="cannot checkpoint an object"):
        save_checkpoint(tmp_path / "x.pt", {"f": Payload(tmp_path / "m")})
    assert not (tmp_path / "x.pt").exists() and not list(tmp_path.glob(".x.pt.*"))


@pytest.mark.slow
def test_a_second_writer_is_refused_and_the_first_finishes_intact(tmp_path):
    run = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "core", "run", "--total-steps", "150000", "--run-dir", str(run),
                              "--no-progress", "--no-tensorboard", "--eval-episodes", "1"], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (run / "checkpoint.pt").exists():
        time.sleep(0.05)
    assert (run / "checkpoint.pt").exists(), "the first writer never checkpointed"
    config_before = (run / "config.yaml").read_bytes()
    _one_line(_dapo("run", "--run-dir", run, "--seed", "7"), expect="being written by another process")
    _one_line(_dapo("run", "--resume", run, "--total-steps", "200000"), expect="being written by another process")
    assert (run / "config.yaml").read_bytes() == config_before
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    rows = _rows(run / "metrics.csv")
    assert rows and "global_step" in rows[0] and int(rows[-1]["global_step"]) == 150016
    assert (run / "summary.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("after_checkpoint,kill_after_s", [(True, 0.0), (True, 2.0), (False, 5.0)])
def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path, after_checkpoint, kill_after_s):
    """SIGKILL a CartPole run (right after its first checkpoint, 2 s later, or 5 s after the start), then --resume:
    the metrics equal an uninterrupted run's row for row (the rows a killed run logged after its last checkpoint
    are dropped and made again)."""
    args = ["run", "--env", "CartPole-v1", "--total-steps", "60000", "--no-progress", "--no-tensorboard",
            "--eval-episodes", "2"]
    full, cut = tmp_path / "full", tmp_path / "cut"
    _dapo(*args, "--run-dir", full, check=True)
    proc = subprocess.Popen([sys.executable, "-m", "core", *args, "--run-dir", str(cut)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while after_checkpoint and time.time() < deadline and not (cut / "checkpoint.pt").exists():
        time.sleep(0.01)
    time.sleep(kill_after_s)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if not (cut / "checkpoint.pt").exists():  # killed before the first update ended: nothing to resume yet
        pytest.skip(f"killed at {kill_after_s}s before the first checkpoint (start-up was slow)")
    _dapo("run", "--resume", cut, "--no-progress", check=True)
    assert _rows(cut / "metrics.csv") == _rows(full / "metrics.csv")
    assert not list(cut.glob(".*.tmp"))


def _fill(path: Path, leave_bytes: int) -> None:
    free = shutil.disk_usage(path).free
    with open(path / "filler", "wb") as f:
        f.write(b"\0" * max(0, free - leave_bytes))


@pytest.mark.slow
def test_a_full_disk_gives_one_line_keeps_the_last_checkpoint_and_resume_works_after(tmp_path):
    """On a small tmpfs (where the machine allows mounting one): out of space while checkpointing, the run stops with
    one line and a non-zero exit, the previous checkpoint intact; once space is freed, --resume finishes."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN); the RLIMIT_FSIZE test covers the path")
    try:
        run = mount / "run"
        base = ["--total-steps", "2048", "--no-progress", "--no-tensorboard", "--eval-episodes", "1"]
        _dapo("run", *base, "--run-dir", run, check=True)
        before = (run / "checkpoint.pt").read_bytes()
        _fill(mount, leave_bytes=64_000)  # room for metrics rows, not for a checkpoint
        err = _one_line(_dapo("run", "--resume", run, "--total-steps", "4096", "--no-progress"), code=1,
                        expect="no space left")
        assert "--resume" in err and (run / "checkpoint.pt").read_bytes() == before
        (mount / "filler").unlink()
        _dapo("run", "--resume", run, "--total-steps", "4096", "--no-progress", check=True)
        assert int(_rows(run / "metrics.csv")[-1]["global_step"]) == 4096
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


@pytest.mark.slow
def test_a_file_size_limit_gives_the_same_one_line_and_resume_works_after(tiny_run, tmp_path):
    """The same path without root: RLIMIT_FSIZE makes the checkpoint write fail with EFBIG."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = (run / "checkpoint.pt").read_bytes()
    limit = len(before) // 2

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    err = _one_line(_dapo("run", "--resume", run, "--total-steps", "1024", "--no-progress", preexec_fn=small_files),
                    code=1, expect="no space left")
    assert "the last checkpoint is intact" in err and (run / "checkpoint.pt").read_bytes() == before
    _dapo("run", "--resume", run, "--total-steps", "1024", "--no-progress", check=True)
    assert int(_rows(run / "metrics.csv")[-1]["global_step"]) == 1024


def test_orphan_temporary_files_are_removed_when_a_run_starts(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / ".checkpoint.pt.abc123.tmp").write_bytes(b"half a checkpoint")
    _dapo("run", "--resume", run, "--total-steps", "640", "--no-progress", check=True)
    assert not list(run.glob(".*.tmp"))


TINY = ["--algo", "ppo", "--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--eval-episodes", "1",
        "--no-progress", "--no-tensorboard"]


def _main_one_line(capsys, argv, expect, code=2):
    from core.run.cli import main

    capsys.readouterr()
    assert main([str(a) for a in argv]) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and expect in err, err
    return err


def test_a_start_stopped_before_its_first_checkpoint_can_be_started_again(tiny_run, tmp_path, capsys):
    """Ctrl-C or SIGKILL before the first checkpoint leaves config.yaml and the lock: no run to resume, and a fresh
    start reuses the directory, saying so in one line."""
    dead = tmp_path / "dead"
    dead.mkdir()
    shutil.copy(tiny_run / "config.yaml", dead)
    (dead / ".lock").touch()
    _main_one_line(capsys, ["run", "--resume", dead], "has no checkpoint to resume; start it without --resume")
    _main_one_line(capsys, ["run", "--run-dir", dead, "--total-steps", "128", *TINY], "held a start that never "
                   "checkpointed; starting afresh there (its config.yaml is replaced)", code=0)
    assert (dead / "checkpoint.pt").exists() and "total_steps: 128" in (dead / "config.yaml").read_text()


def test_a_start_that_fails_after_taking_the_lock_leaves_nothing(tmp_path, monkeypatch, capsys):
    import core.run.runner
    from core.config.errors import ConfigError

    def failing(cfg, run_dir):
        raise ConfigError("the trainer refused")
    monkeypatch.setattr(core.run.runner, "Trainer", failing)
    _main_one_line(capsys, ["run", "--run-dir", tmp_path / "new" / "run", *TINY], "the trainer refused")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "empty").mkdir()
    _main_one_line(capsys, ["run", "--run-dir", tmp_path / "empty", *TINY], "the trainer refused")
    assert list((tmp_path / "empty").iterdir()) == []


def test_resume_without_total_steps_accepts_a_budget_rounded_up_to_whole_iterations(tmp_path, capsys):
    from core.run.cli import main

    run = tmp_path / "run"
    assert main(["run", "--run-dir", str(run), "--total-steps", "200", *TINY]) == 0  # 2 iterations of 128: 256
    assert main(["run", "--resume", str(run), "--no-progress"]) == 0
    assert "total_steps: 200" in (run / "config.yaml").read_text()
    _main_one_line(capsys, ["run", "--resume", run, "--total-steps", "100"], "--total-steps 100 is below the 256 "
                   "steps this run has done; give at least 256")


BYTES = b"\x00" * 8
MALFORMED = {  # what decode() is given in place of an encoded array or record
    "record named by a keyword": {"__namedtuple__": "class", "fields": ["a"], "values": [1]},
    "record with a repeated field": {"__namedtuple__": "R", "fields": ["a", "a"], "values": [1, 2]},
    "record with extra values": {"__namedtuple__": "R", "fields": ["a"], "values": [1, 2]},
    "bytes short of the shape": {"__ndarray__": b"\x00" * 3, "dtype": "<f4", "shape": [2]},
    "unparsable dtype": {"__ndarray__": BYTES, "dtype": [["a", "O"]], "shape": [1]},
    "structured object dtype": {"__ndarray__": BYTES, "dtype": [("a", "O")], "shape": [1]},
    "object dtype": {"__ndarray__": BYTES, "dtype": "|O", "shape": [1]},
    "unknown dtype": {"__ndarray__": BYTES, "dtype": "nonsense", "shape": [1]},
    "negative shape": {"__ndarray__": BYTES, "dtype": "<f8", "shape": [-1]},
    "text for bytes": {"__ndarray__": "text", "dtype": "<f8", "shape": [1]},
    "no shape": {"__ndarray__": BYTES, "dtype": "<f8"},
}


@pytest.mark.parametrize("payload", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_checkpoint_data_is_refused_in_one_line(tmp_path, payload):
    from core.training.checkpoint import load_checkpoint
    from core.config.errors import ConfigError
    torch.save({"version": 2, "global_step": 1, "actor": payload}, tmp_path / "c.pt")
    with pytest.raises(ConfigError, match=f"checkpoint {tmp_path / 'c.pt'} .*(refused|corrupt)") as e:
        load_checkpoint(tmp_path / "c.pt")
    assert "\n" not in str(e.value)


def test_summaries_are_standard_json_and_say_n_a_for_undefined_numbers(tiny_run, tmp_path):
    """One eval episode has no sample std: summary.json holds null (not NaN), the summary lines print n/a."""
    import json

    from core.training.checkpoint import write_json
    from core.run.runner import summary_line
    from dapo_dt.runner import summary_line as dt_line
    from dapo_ma.runner import summary_line as ma_line

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"summary.json holds {c}"))
    assert strict((tiny_run / "summary.json").read_text())["eval_return_std"] is None
    nan = float("nan")
    write_json(tmp_path / "s.json", {"a": nan, "b": [1.0, float("inf")], "c": {"d": -float("inf")}})
    assert strict((tmp_path / "s.json").read_text()) == {"a": None, "b": [1.0, None], "c": {"d": None}}
    common = {"algo": "ppo", "env": "CartPole-v1", "total_steps": 1, "wall_time_s": 1.0, "sps": 1.0,
              "final_return_mean": nan, "eval_return_mean": 2.0, "eval_return_std": nan, "health_events": {},
              "run_dir": "r", "dataset": "d", "dataset_steps": 1, "grad_steps": 1, "online_env_steps": 0,
              "human_normalised": nan}
    for line in (summary_line(common), ma_line(common), dt_line(common)):
        assert "nan" not in line and "+- n/a" in line, line


def test_a_run_dir_that_holds_other_files_is_refused(tmp_path, monkeypatch, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    for run_dir in (".", str(tmp_path), "/"):
        _main_one_line(capsys, ["run", "--run-dir", run_dir, *TINY], "" if run_dir == "/" else "holds other files "
                       "(notes.txt); choose an empty or new directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_live_run_is_reported_as_being_written_not_as_finished(tiny_run, tmp_path, capsys):
    """A second writer is told another process writes there, before anything about the run's files."""
    import fcntl

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = _digest(run)
    with open(run / ".lock", "r+") as held:  # as the live writer holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        held.truncate(0)
        held.write("4242")
        held.flush()
        for argv in (["run", "--run-dir", run, *TINY], ["run", "--resume", run, "--total-steps", "1024"],
                     ["run", "--resume", run, "--total-steps", "1"]):
            _main_one_line(capsys, argv, f"{run} is being written by another process (pid 4242)")
    assert _digest(run) == {**before, ".lock": _digest(run)[".lock"]}
