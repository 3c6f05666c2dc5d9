"""Decision Transformers on any Minari dataset with flat Box observations (issue 55): datasets written here with
Minari's own API (``minari.create_dataset_from_buffers``; random Pendulum-v1 episodes for Box actions, random
CartPole-v1 episodes for Discrete ones) train dt, dapo-dt, bc and pct-bc, evaluate, resume exactly and are scored
by ``dapo eval``, through the CLI and ``dapo_dt.train``; bad datasets give one line, exit 2 and write nothing; the
continuous action loss by hand; issue 57's dataset-command fixes."""
import json
import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

import dapo_dt
from core.config.errors import ConfigError
from core.run.cli import main
from dapo_dt import data
from dapo_dt.losses import weighted_mse_action_loss
from dapo_dt.model import DecisionTransformer, DTModelConfig
from dapo_dt.trainer import DTTrainer

TINY = ["--grad-steps", "4", "--eval-every", "2", "--n-embd", "16", "--n-layer", "1", "--batch-size", "4",
        "--context-len", "5", "--eval-episodes", "2", "--eval-max-steps", "30", "--no-progress"]


@pytest.fixture(autouse=True)
def minari_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))


def _random_episodes(env, episodes, seed=0):
    from minari.data_collector import EpisodeBuffer

    env.action_space.seed(seed)
    out = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        O, A, R, T, U = [obs], [], [], [], []
        while True:
            a = env.action_space.sample()
            obs, r, term, trunc, _ = env.step(a)
            O.append(obs), A.append(a), R.append(float(r)), T.append(bool(term)), U.append(bool(trunc))
            if term or trunc:
                break
        out.append(EpisodeBuffer(id=i, observations=np.array(O), actions=np.array(A), rewards=R, terminations=T,
                                 truncations=U))
    return out


def _write(name, buffers, **kwargs):
    import minari

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return minari.create_dataset_from_buffers(name, buffers, algorithm_name="random", **kwargs)


def _pendulum(name="pendulum/random-v0", episodes=4):
    """Random Pendulum-v1 episodes of 40 steps (the dataset's env spec records the 40-step limit; evaluation plays
    Pendulum-v1 by its id)."""
    env = gym.make("Pendulum-v1", max_episode_steps=40)
    return _write(name, _random_episodes(env, episodes), env=env)


def _cartpole(name="cartpole/random-v0", episodes=20):
    env = gym.make("CartPole-v1")
    return _write(name, _random_episodes(env, episodes), env=env)


def _run(algo, dataset, run_dir, *extra):
    return main(["run", "--algo", algo, "--dataset", dataset, *TINY, "--run-dir", str(run_dir), *extra])


# --- the continuous action loss, scaling, data ---------------------------------------------------------------------

def test_weighted_mse_action_loss_hand_computed():
    """pred (1, 3, 2); token 2 is padding (NaN there must not leak).  Squared errors per token, mean over the 2
    action dims: se_0 = ((0.5-1)^2 + (-0.5-0)^2) / 2 = 0.25, se_1 = ((0-0)^2 + (0-1)^2) / 2 = 0.5.
    Weights (3, 0.5): loss = (3*0.25 + 0.5*0.5) / 2 real tokens = 0.5; unweighted: (0.25 + 0.5) / 2 = 0.375 (the DT
    paper's MSE).  d loss / d pred_00 = 3 * 2 * (0.5 - 1) / 2 dims / 2 tokens = -0.75."""
    pred = torch.tensor([[[0.5, -0.5], [0.0, 0.0], [math.nan, math.nan]]], requires_grad=True)
    actions = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]])
    mask = torch.tensor([[True, True, False]])
    loss, diag = weighted_mse_action_loss(pred, actions, torch.tensor([[3.0, 0.5, 9.0]]), mask)
    assert loss.item() == pytest.approx(0.5)
    assert diag["action_mse"].item() == pytest.approx(0.375)
    assert diag["weight_mean"].item() == pytest.approx(1.75) and diag["weight_max"].item() == 3.0
    loss.backward()
    assert pred.grad[0, 0, 0].item() == pytest.approx(-0.75) and torch.all(pred.grad[0, 2] == 0)
    plain, _ = weighted_mse_action_loss(pred, actions, None, mask)
    assert plain.item() == pytest.approx(0.375)


def test_box_actions_are_scaled_by_the_bounds():
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 10.0])
    np.testing.assert_allclose(data.scale_actions(np.array([[-2.0, 5.0], [3.0, 10.0]]), low, high),
                               [[-1.0, 0.0], [1.0, 1.0]])  # 3 > high: clipped to 1
    np.testing.assert_allclose(data.unscale_actions(np.array([0.0, -1.0]), low, high), [0.0, 0.0])


def test_flat_dataset_loads_with_scaled_actions_stats_and_top_episodes():
    ds = _pendulum()
    raw = list(ds.iterate_episodes())
    traj = data.Trajectories.from_dataset("pendulum/random-v0")
    assert not traj.atari and traj.frames.shape == (4 * 41, 3) and traj.actions.shape == (160, 1)
    np.testing.assert_allclose(traj.actions[:40, 0], raw[0].actions[:, 0] / 2.0, atol=1e-6)  # bounds +-2
    assert traj.env_id == "Pendulum-v1" and traj.n_actions == 0 and traj.act_dim == 1
    mean, std = traj.state_stats()
    every_obs = np.concatenate([ep.observations for ep in raw])
    np.testing.assert_allclose(mean, every_obs.mean(0), rtol=1e-5)
    np.testing.assert_allclose(std, every_obs.std(0) + 1e-6, rtol=1e-5)
    returns = [float(ep.rewards.sum()) for ep in raw]
    best = data.Trajectories.from_dataset("pendulum/random-v0", top_fraction=0.1)  # ceil(0.4) = 1 episode
    assert best.episode_returns.tolist() == pytest.approx([max(returns)])
    b = traj.sample(8, 5, np.random.default_rng(0), torch.device("cpu"))
    assert b.frames.shape == (8, 5, 3) and b.actions.shape == (8, 5, 1) and b.actions.dtype == torch.float32


def test_trainer_saves_the_state_normalisation_with_the_model(tmp_path):
    _cartpole()
    from dapo_dt.config import DTConfig, resolve

    cfg = resolve(DTConfig(dataset="cartpole/random-v0", algo="dt", context_len=5, n_embd=16, grad_steps=1))
    assert cfg.env == "CartPole-v1"  # from the dataset's env_spec
    tr = DTTrainer(cfg, tmp_path)
    mean, std = tr.data.state_stats()
    assert torch.equal(tr.model.state_mean, torch.as_tensor(mean)) and torch.equal(tr.model.state_std,
                                                                                   torch.as_tensor(std))
    assert {"state_mean", "state_std"} <= set(tr.state_dict()["model"])
    assert cfg.context_len == 5 and resolve(DTConfig(dataset="cartpole/random-v0", algo="dt")).context_len == 20


def test_continuous_and_return_blind_models():
    """Box actions: a tanh head in [-1, 1]; a_t never influences the prediction at t.  bc (returns=False): 2 tokens
    per step, and the returns-to-go change nothing."""
    torch.manual_seed(0)
    B, K = 2, 4
    x = {"rtg": torch.randn(B, K), "frames": torch.randn(B, K, 3), "actions": torch.rand(B, K, 2) * 2 - 1,
         "timesteps": torch.arange(K).repeat(B, 1), "mask": torch.ones(B, K, dtype=torch.bool)}
    for returns in (True, False):
        m = DecisionTransformer(DTModelConfig(n_actions=0, state_dim=3, act_dim=2, context_len=K, n_layer=1,
                                              n_embd=16, max_timestep=10, dropout=0.0, returns=returns)).eval()
        out = m(**x).logits
        assert out.shape == (B, K, 2) and out.abs().max() <= 1
        changed = {**x, "actions": x["actions"].clone()}
        changed["actions"][:, 2:] = 0.0
        assert torch.allclose(m(**changed).logits[:, :3], out[:, :3])
        assert not torch.allclose(m(**changed).logits[:, 3], out[:, 3])
        other_rtg = m(**{**x, "rtg": x["rtg"] + 5}).logits
        assert torch.allclose(other_rtg, out) != returns
        assert (m.n_tokens, m.gpt.config.n_positions) == ((3, 3 * K) if returns else (2, 2 * K))


# --- whole runs ------------------------------------------------------------------------------------------------------

def test_online_fine_tuning_on_a_discrete_flat_dataset(tmp_path):
    _cartpole()
    run = tmp_path / "run"
    assert _run("dapo-dt", "cartpole/random-v0", run, "--grad-steps", "2", "--online-steps", "40",
                "--online-envs", "2") == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["online_env_steps"] >= 40 and summary["grad_steps"] > 2


def test_dataset_info_by_name_and_by_path(tmp_path, capsys):
    ds = _pendulum()
    assert main(["dataset", "info", "pendulum/random-v0"]) == 0
    by_name = capsys.readouterr().out
    assert "env_id: Pendulum-v1" in by_name and "episodes: 4" in by_name and "action_space: Box" in by_name
    assert main(["dataset", "info", "--path", str(ds.storage.data_path)]) == 0
    assert "episodes: 4" in capsys.readouterr().out
    assert main(["dataset", "info"]) == 2


@pytest.mark.parametrize("algo", ["dt", "dapo-dt", "bc", "pct-bc"])
@pytest.mark.parametrize("dataset", ["pendulum", "cartpole"])
def test_every_algorithm_trains_evaluates_and_dapo_eval_scores_it(tmp_path, capsys, algo, dataset):
    """Box actions (Pendulum-v1) and Discrete ones (CartPole-v1), flat states: 4 gradient steps, evaluations at steps
    2 and 4 in the env the dataset records, then ``dapo eval`` from the run directory alone."""
    (_pendulum if dataset == "pendulum" else _cartpole)()
    name, run = f"{dataset}/random-v0", tmp_path / "run"
    assert _run(algo, name, run) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env"] == ("Pendulum-v1" if dataset == "pendulum" else "CartPole-v1")
    assert summary["grad_steps"] == 4 and len(summary["eval_scores"]) == 2 and (run / "learning_curve.png").exists()
    header = (run / "metrics.csv").read_text().splitlines()[0]
    assert ("train/action_mse" in header) == (dataset == "pendulum")  # MSE for Box actions, else cross-entropy
    assert ("train/value_loss" in header) == (algo == "dapo-dt")
    best = data.Trajectories.from_dataset(name, top_fraction=0.1).num_steps  # the best ceil(10%) episodes
    assert summary["dataset_steps"] == (best if algo == "pct-bc" else data.info(name)["steps"])
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "1"]) == 0
    assert "eval_return_mean" in capsys.readouterr().out


def _interrupt_at(monkeypatch, step):
    original = DTTrainer.iterate

    def iterate(self):
        metrics = original(self)
        if self.grad_step == step:
            self.stop_requested = True
        return metrics
    monkeypatch.setattr(DTTrainer, "iterate", iterate)


def _learning_columns(run):
    rows = (run / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    keep = [i for i, h in enumerate(header) if not h.startswith("time/")]
    return [[r.split(",")[i] for i in keep] for r in rows]


@pytest.mark.parametrize("algo,dataset", [("dapo-dt", "pendulum"), ("dt", "cartpole")])
def test_resume_continues_exactly(tmp_path, monkeypatch, algo, dataset):
    """Metrics after an interruption at step 3 and a resume equal an uninterrupted run's (dropout on)."""
    (_pendulum if dataset == "pendulum" else _cartpole)()
    extra = ["--grad-steps", "6", "--eval-every", "3"]
    assert _run(algo, f"{dataset}/random-v0", tmp_path / "whole", *extra) == 0
    with monkeypatch.context() as m:
        _interrupt_at(m, 3)
        assert _run(algo, f"{dataset}/random-v0", tmp_path / "parts", *extra) == 130
    assert main(["run", "--resume", str(tmp_path / "parts"), "--no-progress"]) == 0
    assert _learning_columns(tmp_path / "parts") == _learning_columns(tmp_path / "whole")
    whole, parts = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("whole", "parts"))
    assert parts["eval_scores"] == whole["eval_scores"]


def test_python_api_trains_from_a_dataset_path_resumes_and_evaluates(tmp_path, monkeypatch):
    ds = _pendulum()
    path = ds.storage.data_path.parent  # the dataset's folder (its data/ folder works too)
    opts = dict(dataset_path=str(path), algo="dapo-dt", grad_steps=4, eval_every=2, n_embd=16, n_layer=1,
                batch_size=4, context_len=5, eval_episodes=2, eval_max_steps=30, progress=False)
    whole = dapo_dt.train(**opts, run_dir=str(tmp_path / "whole"))
    assert whole.config.env == "Pendulum-v1" and whole.config.dataset_path == str(path.resolve())
    with monkeypatch.context() as m:
        _interrupt_at(m, 2)
        from core.config.errors import RunInterrupted

        with pytest.raises(RunInterrupted):
            dapo_dt.train(**opts, run_dir=str(tmp_path / "parts"))
    parts = dapo_dt.train(resume=tmp_path / "parts", progress=False)
    assert parts.summary["eval_scores"] == whole.summary["eval_scores"]
    agent = dapo_dt.load(whole.run_dir)
    result = agent.evaluate(episodes=1)
    assert len(result.returns) == 1 and result.mean < 0  # Pendulum's returns are negative


# --- bad datasets: one line, exit 2, nothing written ---------------------------------------------------------------

def _strip(path, key):
    """Remove ``key`` (rewards, terminations) from the dataset's first episode in its HDF5 file."""
    import h5py

    with h5py.File(path / "data" / "main_data.hdf5", "a") as f:
        del f["episode_0"][key]


def _bad_dataset(kind, tmp_path):
    """A dataset name (or a path) that must be refused, and the words of its one-line error."""
    from minari.data_collector import EpisodeBuffer

    one = {"actions": np.zeros(3, np.int64), "rewards": [0.0] * 3, "terminations": [False, False, True],
           "truncations": [False] * 3}
    if kind == "dict":
        space = gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (2,), np.float32)})
        obs = {"x": np.zeros((4, 2), np.float32)}
        _write("bad/dict-v0", [EpisodeBuffer(id=0, observations=obs, **one)], observation_space=space,
               action_space=gym.spaces.Discrete(2))
        return ["--dataset", "bad/dict-v0"], "observation space Dict"
    if kind == "image":
        space = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)
        _write("bad/image-v0", [EpisodeBuffer(id=0, observations=np.zeros((4, 16, 16, 3), np.uint8), **one)],
               observation_space=space, action_space=gym.spaces.Discrete(2), jpeg_encoding=False)
        return ["--dataset", "bad/image-v0"], "flat Box observations or the 84x84"
    if kind in ("rewards", "terminations"):
        _strip(_cartpole(f"bad/{kind}-v0").storage.data_path.parent, kind)
        return ["--dataset", f"bad/{kind}-v0"], "every episode needs observations, actions, rewards, terminations"
    if kind == "short":
        _cartpole("bad/short-v0", episodes=3)
        return ["--dataset", "bad/short-v0", "--context-len", "600"], "every episode is shorter than the context"
    if kind == "no-env":
        _write("bad/noenv-v0", [EpisodeBuffer(id=0, observations=np.zeros((4, 2), np.float32), **one)],
               observation_space=gym.spaces.Box(-1, 1, (2,), np.float32), action_space=gym.spaces.Discrete(2))
        return ["--dataset", "bad/noenv-v0"], "records no env"
    if kind == "not-a-dataset":
        (tmp_path / "folder").mkdir()
        return ["--dataset-path", str(tmp_path / "folder")], "is not a Minari dataset"
    if kind == "missing":
        return ["--dataset", "nothing-v0"], "no local Minari dataset 'nothing-v0'"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["dict", "image", "rewards", "terminations", "short", "no-env", "not-a-dataset",
                                  "missing"])
def test_bad_datasets_give_one_line_and_write_nothing(tmp_path, capsys, kind):
    args, words = _bad_dataset(kind, tmp_path)
    capsys.readouterr()
    run = tmp_path / "run"
    tiny = [a for a in TINY if a not in ("--context-len", "5")] if "--context-len" in args else TINY
    assert main(["run", "--algo", "dt", *args, *tiny, "--run-dir", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert not run.exists()


def test_dataset_and_dataset_path_exclude_each_other(tmp_path):
    from dapo_dt.config import DTConfig, resolve

    with pytest.raises(ConfigError, match="not both"):
        resolve(DTConfig(dataset="a-v0", dataset_path=str(tmp_path), algo="dt"))
    _cartpole()
    with pytest.raises(ConfigError, match="--top-fraction.*option of pct-bc"):
        resolve({"dataset": "cartpole/random-v0", "algo": "bc", "top_fraction": 0.2})
    _pendulum()
    with pytest.raises(ConfigError, match="drop --online-steps"):  # Box actions: a deterministic policy
        DTTrainer(resolve(DTConfig(dataset="pendulum/random-v0", algo="dt", context_len=5, online_steps=10)),
                  tmp_path / "x")


# --- issue 57: dataset commands ------------------------------------------------------------------------------------

def test_malformed_metadata_adds_no_warnings_and_is_refused_in_one_line(tmp_path, capsys):
    _cartpole()
    bad = tmp_path / "minari" / "broken-v0" / "data"
    bad.mkdir(parents=True)
    (bad / "metadata.json").write_text("{")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["dataset", "info", "cartpole/random-v0"]) == 0
        assert main(["dataset", "info", "broken-v0"]) == 2
    assert [str(w.message) for w in caught if "isconfigured" in str(w.message)] == []
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'broken-v0' is unreadable" in err


@pytest.mark.parametrize("actor", ["missing", "list"])
def test_collect_refuses_a_checkpoint_without_an_actor_in_one_line(tmp_path, capsys, actor):
    from core.config.parsing import write_yaml_config
    from core.run.runner import resolve_for_env
    from core.training.checkpoint import save_checkpoint

    pytest.importorskip("ale_py")
    policy = tmp_path / "ppo"
    policy.mkdir()
    (policy / "config.yaml").write_text(write_yaml_config(resolve_for_env({"env": "ALE/Pong-v5", "algo": "ppo"})))
    save_checkpoint(policy / "checkpoint.pt", {"global_step": 0} if actor == "missing" else {"actor": [1, 2]})
    assert main(["dataset", "collect", "--env", "ALE/Pong-v5", "--policy", str(policy), "--steps", "10",
                 "--name", "pong/x-v0", "--num-envs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not a policy checkpoint" in err, err
    assert not (tmp_path / "minari" / "pong").exists()


def test_eval_of_a_run_whose_config_names_another_env_gives_one_line(tmp_path, capsys):
    """A flat-state run's config.yaml edited to name an env with other spaces (and an Atari model against a flat env):
    one line, exit 2, instead of a traceback."""
    _pendulum()
    run = tmp_path / "run"
    assert _run("dt", "pendulum/random-v0", run) == 0
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(text.replace("Pendulum-v1", "CartPole-v1"))
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "this model was trained on 3-d states and 1-d Box actions" in err, err
    from dapo_dt.acting import check_env_fits

    atari = DecisionTransformer(DTModelConfig(n_actions=6, context_len=2, n_layer=1, n_embd=16))
    with pytest.raises(ConfigError, match="trained on 4x84x84 Atari frame stacks and 6 Discrete actions"):
        check_env_fits(atari, gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), "CartPole-v1")
