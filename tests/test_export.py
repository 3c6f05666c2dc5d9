"""`dapo export RUN_DIR --onnx FILE` / `Agent.export_onnx` (the policy for onnxruntime, normaliser folded in) and
`dapo eval RUN_DIR --video DIR` / `Agent.evaluate(video_dir=...)` (one video file per episode)."""
import shutil

import gymnasium as gym
import numpy as np
import pytest
import torch

import core
from core.run.cli import main

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TINY = dict(algo="dapo", total_steps=1024, num_envs=4, num_steps=64, num_epochs=1, num_minibatches=4,
            progress=False, tensorboard=False, eval_episodes=0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny CartPole run (Discrete) and a tiny Pendulum run (Box, observation normaliser on)."""
    root = tmp_path_factory.mktemp("runs")
    return {env: core.train(env=env, run_dir=str(root / env), **TINY).run_dir
            for env in ("CartPole-v1", "Pendulum-v1")}


def _obs(agent, n=512, scale=5.0):
    """Raw observations, many far outside the training data (the normaliser's clip and the action bounds bite)."""
    x = np.random.default_rng(0).normal(0, scale, (n, *agent.observation_space.shape))
    return x.astype(agent.observation_space.dtype)


def _noise(agent, n=512, seed=1):
    rng = np.random.default_rng(seed)
    if isinstance(agent.action_space, gym.spaces.Discrete):
        return rng.random(n).astype(np.float32)
    return rng.standard_normal((n, *agent.action_space.shape)).astype(np.float32)


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_exported_policy_acts_as_predict(runs, env, tmp_path):
    agent = core.load(runs[env])
    obs = _obs(agent)
    det = ort.InferenceSession(str(agent.export_onnx(tmp_path / "det.onnx")))
    assert [i.name for i in det.get_inputs()] == ["obs"]
    out = det.run(None, {"obs": obs})[0]
    ref = agent.predict(obs, deterministic=True)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=0)
    assert det.run(None, {"obs": obs[:1]})[0][0] == pytest.approx(agent.predict(obs[0]), abs=1e-5)  # batch of 1

    sto = ort.InferenceSession(str(agent.export_onnx(tmp_path / "sto.onnx", deterministic=False)))
    assert [i.name for i in sto.get_inputs()] == ["obs", "noise"]
    noise = _noise(agent)
    out = sto.run(None, {"obs": obs, "noise": noise})[0]
    np.testing.assert_allclose(out, agent.predict(obs, deterministic=False, noise=noise), atol=1e-5, rtol=0)
    if env == "Pendulum-v1":  # the toolkit's own sample: mean + std * noise, clipped to the bounds
        assert agent.config.norm_obs
        x = torch.as_tensor(agent.obs_norm(obs))
        with torch.no_grad():
            mean = agent.actor.net(x).numpy()
        own = np.clip(mean + np.exp(agent.actor.log_std.detach().numpy()) * noise, -2.0, 2.0)
        np.testing.assert_allclose(out, own, atol=1e-5, rtol=0)
        assert np.abs(out).max() == pytest.approx(2.0)  # some actions clipped


def test_sampled_discrete_actions_follow_the_policy(runs, tmp_path):
    """The exported sampler's law (inverse CDF of uniform noise) is the actor's categorical."""
    agent = core.load(runs["CartPole-v1"])
    obs = np.repeat(np.array([[0.01, 0.5, -0.02, -0.3]], np.float32), 20_000, 0)
    sess = ort.InferenceSession(str(agent.export_onnx(tmp_path / "sto.onnx", deterministic=False)))
    actions = sess.run(None, {"obs": obs, "noise": _noise(agent, len(obs))})[0]
    with torch.no_grad():
        probs = agent.actor.distribution(torch.as_tensor(agent.obs_norm(obs[:1]))).probs[0].numpy()
    assert np.bincount(actions, minlength=2) / len(actions) == pytest.approx(probs, abs=0.015)


def test_atari_cnn_policy_exports():
    """The Nature-CNN actor (uint8 frames) exports too (built here, not trained: no emulator needed)."""
    from core.algo.networks import build_networks
    from core.config.options import TrainConfig
    from core.envs.rollout import ObsNormalizer
    from core.run.api import Agent

    obs_space, act_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6)
    torch.manual_seed(0)
    actor, critic = build_networks(obs_space, act_space, (64,))
    with torch.no_grad():
        actor.net[1].weight.mul_(100)  # spread the logits: argmax ties would be float noise
    agent = Agent(TrainConfig(env="ALE/Pong-v5"), actor.eval(), critic, ObsNormalizer(obs_space.shape, False),
                  obs_space, act_space, torch.device("cpu"))
    frames = np.random.default_rng(0).integers(0, 256, (8, 4, 84, 84), dtype=np.uint8)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        sess = ort.InferenceSession(str(agent.export_onnx(f"{d}/pong.onnx")))
        np.testing.assert_array_equal(sess.run(None, {"obs": frames})[0], agent.predict(frames))
        sess = ort.InferenceSession(str(agent.export_onnx(f"{d}/pong_s.onnx", deterministic=False)))
        noise = np.random.default_rng(1).random(8).astype(np.float32)
        np.testing.assert_array_equal(sess.run(None, {"obs": frames, "noise": noise})[0],
                                      agent.predict(frames, deterministic=False, noise=noise))


def _one_line_error(capsys, argv, expect: str):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err and expect in err, err
    return err


def test_cli_export_and_bad_input(runs, tmp_path, capsys):
    run = runs["Pendulum-v1"]
    out = tmp_path / "p.onnx"
    assert main(["export", str(run), "--onnx", str(out), "--stochastic"]) == 0
    assert "wrote" in capsys.readouterr().out
    sess = ort.InferenceSession(str(out))
    assert [i.name for i in sess.get_inputs()] == ["obs", "noise"]
    meta = sess.get_modelmeta().custom_metadata_map
    assert meta["env"] == "Pendulum-v1" and meta["deterministic"] == "false"

    bare = tmp_path / "bare"  # a run directory without a policy
    bare.mkdir()
    shutil.copy(run / "config.yaml", bare / "config.yaml")
    _one_line_error(capsys, ["export", str(bare), "--onnx", str(tmp_path / "a.onnx")], "no checkpoint")
    _one_line_error(capsys, ["export", str(tmp_path / "nothing"), "--onnx", str(tmp_path / "a.onnx")],
                    "not a run directory")
    ma = tmp_path / "ma"  # a family that cannot be exported
    ma.mkdir()
    (ma / "config.yaml").write_text("algo: mappo\n")
    _one_line_error(capsys, ["export", str(ma), "--onnx", str(tmp_path / "a.onnx")], "Gymnasium-family runs")
    _one_line_error(capsys, ["export", str(run), "--onnx", str(tmp_path / "missing" / "a.onnx")], "does not exist")
    _one_line_error(capsys, ["export", str(run), "--onnx", str(tmp_path)], "is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare", "ma", "p.onnx"]  # nothing else written


def test_eval_video_writes_one_file_per_episode(runs, tmp_path, capsys):
    run = runs["CartPole-v1"]
    videos = tmp_path / "videos" / "cartpole"
    assert main(["eval", str(run), "--episodes", "2", "--video", str(videos)]) == 0
    printed = capsys.readouterr().out
    files = sorted(videos.iterdir())
    assert [f.stem for f in files] == ["eval-episode-0", "eval-episode-1"], files
    assert all(f.stat().st_size > 0 and f.suffix in (".mp4", ".gif") for f in files)
    assert main(["eval", str(run), "--episodes", "2"]) == 0  # the same episodes as without video
    assert capsys.readouterr().out.splitlines()[0] == printed.splitlines()[0]

    agent = core.load(run)
    api_dir = tmp_path / "api"
    ev = agent.evaluate(episodes=2, video_dir=api_dir)
    assert ev.returns == agent.evaluate(episodes=2).returns and len(list(api_dir.iterdir())) == 2

    a_file = tmp_path / "file"
    a_file.write_text("x")
    _one_line_error(capsys, ["eval", str(run), "--video", str(a_file)], "is a file")
    _one_line_error(capsys, ["eval", str(run), "--video", str(a_file / "sub")], "is a file")
    assert a_file.read_text() == "x"
