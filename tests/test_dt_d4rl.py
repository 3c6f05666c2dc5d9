"""D4RL-style datasets from the toolkit's own runs (issue 55 item 2, ``dapo dataset d4rl``, dapo_dt/d4rl.py) and the
normalised score dt reports on them; %BC is BC on the best 10% of the episodes (item 3).

A tiny PPO run on InvertedPendulum-v5 (8192 steps, a snapshot every 2048) stands in for a 1M-step expert run."""
import dataclasses
import json
import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

from core.run.cli import main
from dapo_dt import d4rl, data

TINY_DT = ["--grad-steps", "4", "--eval-every", "2", "--n-embd", "16", "--n-layer", "1", "--batch-size", "4",
           "--context-len", "5", "--eval-episodes", "2", "--no-progress"]


@pytest.fixture(autouse=True)
def minari_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("ppo") / "run"
    assert main(["run", "--algo", "ppo", "--env", "InvertedPendulum-v5", "--total-steps", "8192", "--snapshot-every",
                 "2048", "--eval-episodes", "0", "--no-progress", "--no-tensorboard", "--run-dir", str(run)]) == 0
    return run


def _make(run, *extra):
    return main(["dataset", "d4rl", "--env", "InvertedPendulum-v5", "--run", str(run), "--namespace", "ip/dapo",
                 "--steps", "400", "--select-episodes", "2", "--ref-episodes", "4", "--num-envs", "2", *extra])


def _load(kind):
    import minari

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return minari.load_dataset(f"ip/dapo/{kind}-v0")


def test_the_four_datasets_with_reference_scores(ppo_run, tmp_path, capsys):
    assert sorted(p.name for p in (ppo_run / "snapshots").iterdir())[0] == "step_000000000.pt"  # the initial policy
    assert _make(ppo_run) == 0
    out = capsys.readouterr().out
    sets = {k: _load(k) for k in d4rl.KINDS}
    meta = {k: json.loads(ds.storage.metadata[data.METADATA_KEY]) for k, ds in sets.items()}
    returns = {k: [float(ep.rewards.sum()) for ep in ds.iterate_episodes()] for k, ds in sets.items()}
    ref_min, ref_max = sets["expert"].storage.metadata["ref_min_score"], sets["expert"].storage.metadata["ref_max_score"]
    for k, ds in sets.items():
        assert ds.spec.env_spec.id == "InvertedPendulum-v5" and f"ip/dapo/{k}-v0" in out
        assert (ds.storage.metadata["ref_min_score"], ds.storage.metadata["ref_max_score"]) == (ref_min, ref_max)
        assert meta[k]["kind"] == k and meta[k]["expert_step"] == 8192
    assert ref_max == pytest.approx(np.mean(returns["expert"]))  # the expert's mean return
    assert ref_min < ref_max
    for k in ("expert", "medium"):  # whole episodes until 400 steps; the running ones finish
        assert 400 <= sets[k].total_steps < 400 + 2 * 1000
    assert returns["medium-expert"] == returns["medium"] + returns["expert"]
    medium_step = meta["medium"]["medium_step"]
    assert medium_step in (2048, 4096, 6144) and meta["medium"]["medium_target_return"] == pytest.approx(
        ref_min + (ref_max - ref_min) / 3)
    assert 0 < sets["medium-replay"].total_steps <= medium_step  # finished episodes of the first medium_step steps
    for ep in sets["medium"].iterate_episodes():  # executed actions within the bounds; one end flag per episode
        assert np.all(np.abs(ep.actions) <= 3.0) and ep.terminations[-1] != ep.truncations[-1]
    # dt reads it by path and reports D4RL's normalised score
    assert main(["run", "--algo", "dt", "--dataset-path", str(tmp_path / "minari" / "ip" / "dapo" / "medium-replay-v0"),
                 *TINY_DT, "--run-dir", str(tmp_path / "dt")]) == 0
    s = json.loads((tmp_path / "dt" / "summary.json").read_text())
    assert s["env"] == "InvertedPendulum-v5" and s["ref_scores"] == pytest.approx([ref_min, ref_max])
    assert s["normalised_score"] == pytest.approx(100 * (s["eval_return_mean"] - ref_min) / (ref_max - ref_min))
    assert "normalised score" in capsys.readouterr().out
    assert main(["eval", str(tmp_path / "dt"), "--episodes", "2"]) == 0
    line = capsys.readouterr().out
    mean = float(line.split("eval_return_mean ")[1].split()[0])
    shown = float(line.split("normalised_score ")[1].split()[0])
    assert shown == pytest.approx(100 * (mean - ref_min) / (ref_max - ref_min), abs=0.2)
    import dapo_dt  # the Python API gives the same normalisation
    assert dapo_dt.load(tmp_path / "dt").normalised_score(mean) == pytest.approx(
        100 * (mean - ref_min) / (ref_max - ref_min))


def test_a_named_medium_step_and_its_replay(ppo_run):
    assert _make(ppo_run, "--medium-step", "2048") == 0
    medium, replay = _load("medium"), _load("medium-replay")
    assert json.loads(medium.storage.metadata[data.METADATA_KEY])["medium_step"] == 2048
    assert 0 < replay.total_steps <= 2048


def _bad_runs(ppo_run, tmp_path, kind):
    if kind == "no-snapshots":
        run = tmp_path / "plain"
        assert main(["run", "--algo", "ppo", "--env", "InvertedPendulum-v5", "--total-steps", "2048", "--eval-episodes",
                     "0", "--no-progress", "--no-tensorboard", "--run-dir", str(run)]) == 0
        return ["--run", str(run)], "--snapshot-every"
    if kind == "env-mismatch":
        return ["--run", str(ppo_run), "--env", "Hopper-v5"], "was trained on InvertedPendulum-v5, not Hopper-v5"
    if kind == "not-a-run":
        return ["--run", str(tmp_path)], "expected a run directory"
    if kind == "medium-step":
        return ["--run", str(ppo_run), "--medium-step", "1000"], "--medium-step 1000 is not a snapshot step"
    if kind == "atari":
        return ["--run", str(ppo_run), "--env", "ALE/Pong-v5"], "dapo dataset collect"
    if kind == "bad-namespace":
        return ["--run", str(ppo_run), "--namespace", "a b"], "is not a Minari dataset id"
    if kind == "steps":
        return ["--run", str(ppo_run), "--steps", "0"], "--steps must be in 1"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["no-snapshots", "env-mismatch", "not-a-run", "medium-step", "atari",
                                  "bad-namespace", "steps"])
def test_bad_inputs_give_one_line_and_write_nothing(ppo_run, tmp_path, capsys, kind):
    args, words = _bad_runs(ppo_run, tmp_path, kind)
    capsys.readouterr()
    base = {"--env": "InvertedPendulum-v5", "--namespace": "ip/dapo", "--steps": "400"}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    assert main(["dataset", "d4rl", *[w for kv in base.items() for w in kv]]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert not (tmp_path / "minari").exists()


def test_existing_datasets_are_not_overwritten(ppo_run, tmp_path, capsys):
    assert _make(ppo_run, "--medium-step", "2048") == 0
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "minari").rglob("*"))
    capsys.readouterr()
    assert _make(ppo_run) == 2
    assert "already exists" in capsys.readouterr().err
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "minari").rglob("*")) == before


class _Constant:
    """A stand-in policy whose every action is its own number."""

    def __init__(self, step, value):
        self.step, self.value = step, value

    def act(self, obs, act_space):
        return np.full((len(obs), 1), self.value, np.float32)


def test_replay_gives_each_snapshot_its_own_steps():
    """Snapshots at 0, 30, 60 with actions 0.0, 0.1, 0.2; a 90-step stream on one env: step k's action is that of
    the snapshot the run used at k.  Random-ish actions end InvertedPendulum episodes after a few steps, so several
    episodes finish; the unfinished last one is dropped."""
    space = gym.make("InvertedPendulum-v5").action_space
    policies = [_Constant(0, 0.0), _Constant(30, 0.1), _Constant(60, 0.2)]
    eps = d4rl.replay("InvertedPendulum-v5", policies, 90, 1, 0, space)
    actions = np.concatenate([e.actions[:, 0] for e in eps])
    assert len(eps) >= 2 and 0 < len(actions) <= 90
    expected = np.repeat([0.0, 0.1, 0.2], 30)[:len(actions)]
    np.testing.assert_allclose(actions, expected)
    for e in eps:
        assert len(e.observations) == len(e.actions) + 1


def test_normalised_score_and_reference_scores():
    assert data.normalised_score(50.0, (10.0, 90.0)) == pytest.approx(50.0)  # 100 * 40 / 80
    assert data.normalised_score(-1200.0, (-1200.0, -150.0)) == 0.0 and data.normalised_score(
        -150.0, (-1200.0, -150.0)) == pytest.approx(100.0)
    assert math.isnan(data.normalised_score(1.0, None))
    assert data.reference_scores({"ref_min_score": 1, "ref_max_score": 3.5}) == (1.0, 3.5)
    for bad in ({}, {"ref_min_score": 1}, {"ref_min_score": 2, "ref_max_score": 2}, {"ref_min_score": "x",
                                                                                       "ref_max_score": 1}):
        assert data.reference_scores(bad) is None


# --- item 3: %BC is BC on the best 10% of the episodes -------------------------------------------------------------

def _episodes(n=20, seed=0):
    """``n`` random Pendulum episodes of 12 steps; the rewards are shifted per episode so the returns all differ."""
    from minari.data_collector import EpisodeBuffer

    env = gym.make("Pendulum-v1", max_episode_steps=12)
    env.action_space.seed(seed)
    out = []
    for i in range(n):
        obs, _ = env.reset(seed=seed + i)
        O, A, R = [obs], [], []
        for _ in range(12):
            a = env.action_space.sample()
            obs, r, *_ = env.step(a)
            O.append(obs), A.append(a), R.append(float(r) + 0.37 * ((i * 7) % n))
        out.append(EpisodeBuffer(id=i, observations=np.array(O), actions=np.array(A), rewards=R,
                                 terminations=[False] * 12, truncations=[False] * 11 + [True]))
    return env, out


def test_pct_bc_is_bc_on_the_best_tenth_of_the_episodes(tmp_path):
    """pct-bc on 20 episodes = bc on a dataset of only their best ceil(0.1 * 20) = 2 by return (in dataset order):
    the same data, the same model and, from the same seed, the same weights after a few gradient steps."""
    import minari
    from dapo_dt.config import DTConfig, resolve
    from dapo_dt.trainer import DTTrainer

    env, eps = _episodes()
    returns = np.array([sum(e.rewards) for e in eps])
    best = sorted(np.argsort(-returns)[:2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minari.create_dataset_from_buffers("pend/all-v0", eps, env=env, algorithm_name="random")
        minari.create_dataset_from_buffers("pend/best-v0", [dataclasses.replace(eps[i], id=j) for j, i in enumerate(best)],
                                           env=env, algorithm_name="random")
    small = dict(context_len=5, n_embd=16, n_layer=1, batch_size=4, grad_steps=3, seed=3)
    losses, trainers = {}, {}
    for algo, name in (("pct-bc", "pend/all-v0"), ("bc", "pend/best-v0")):  # one after the other: dropout's global RNG
        trainers[algo] = tr = DTTrainer(resolve(DTConfig(dataset=name, algo=algo, **small)), tmp_path / algo)
        losses[algo] = [tr.train_step()["train/loss"] for _ in range(3)]
    pct, bc = trainers["pct-bc"], trainers["bc"]
    assert pct.data.episode_returns.tolist() == pytest.approx(returns[best].tolist())
    assert pct.data.episode_returns.min() >= np.sort(returns)[-2] - 1e-4
    np.testing.assert_array_equal(pct.data.frames, bc.data.frames)
    assert losses["pct-bc"] == losses["bc"]
    for (name, a), (_, b) in zip(pct.model.state_dict().items(), bc.model.state_dict().items()):
        assert torch.equal(a, b), name
    assert not pct.model.cfg.returns and pct.model.value_head is None  # return-blind, no value head: bc's model
