"""dapo_dt datasets (Minari round trip, K-step windows), training losses, the adaptive clip, and a tiny
collect -> train -> eval run through the CLI."""
import json
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import Tensor

from core.run.cli import main
from core.config.errors import ConfigError
from dapo_dt import collect, data
from dapo_dt.config import DTConfig, resolve
from dapo_dt.online import CLIP_BOUNDS, adapt_clip
from dapo_dt import trainer as dt_trainer
from dapo_dt.trainer import DTTrainer, critic_trust, human_normalised, masked_normalise


@pytest.fixture(autouse=True)
def minari_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))


def _frames(T, offset):
    """(T+1, 84, 84) frames whose pixels all equal offset + frame index: easy to trace through stacks."""
    return np.stack([np.full((84, 84), offset + i, np.uint8) for i in range(T + 1)])


def _write_toy(name="toy-v0", env_id="ALE/Pong-v5"):
    """Two episodes: 3 steps with rewards (1, 0, 2) and 2 steps with rewards (-1, -1)."""
    buffers = [collect.episode_buffer(0, _frames(3, 0), [1, 2, 3], [1.0, 0.0, 2.0]),
               collect.episode_buffer(1, _frames(2, 100), [4, 5], [-1.0, -1.0], truncated=True)]
    collect.write_dataset(name, buffers, gym.spaces.Discrete(6), {"env_id": env_id, "policies": ["toy"], "epsilon": 0.0},
                       "toy")
    return name


def test_minari_round_trip_and_info():
    _write_toy()
    traj = data.Trajectories.from_dataset("toy-v0")
    np.testing.assert_array_equal(traj.actions, [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(traj.rtg, [3.0, 2.0, 2.0, -2.0, -1.0])  # undiscounted returns-to-go
    np.testing.assert_array_equal(traj.timesteps, [0, 1, 2, 0, 1])
    assert traj.frames.shape == (7, 84, 84) and traj.frames[4, 0, 0] == 100  # lossless frames
    info = data.info("toy-v0")
    assert (info["episodes"], info["steps"], info["return_mean"]) == (2, 5, 0.5)
    assert info["return_min_q25_median_q75_max"][0] == -2.0 and info["return_min_q25_median_q75_max"][-1] == 3.0
    assert data.Trajectories.from_dataset("toy-v0", max_steps=3).num_steps in (2, 3)  # whole episodes


def test_return_predictability_keys_and_report(tmp_path):
    from experiments.dt_return_predictability import main as predictability, predictors

    G, keys, episode = predictors([(np.array([1.0, -1.0, 0.0, 1.0]), 0), (np.array([-1.0, -1.0]), 1)])
    np.testing.assert_array_equal(G, [1, 0, 1, 1, -2, -1])              # reward-to-go per game
    np.testing.assert_array_equal(keys["points played"], [0, 1, 2, 2, 0, 1])  # points before step t
    np.testing.assert_array_equal(keys["score (won, lost)"], [0, 1000, 1001, 1001, 0, 1])
    np.testing.assert_array_equal(keys["behaviour policy"], [0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(episode, [0, 0, 0, 0, 1, 1])
    _write_toy()
    assert predictability(["--datasets", "toy-v0", "--out", str(tmp_path / "out")]) == 0
    assert "| behaviour policy |" in (tmp_path / "out" / "results.md").read_text()
    assert predictability(["--datasets", "missing-v0", "--out", str(tmp_path / "out")]) == 2


def test_stacks_pad_the_episode_start_with_its_first_frame():
    traj = data.Trajectories.from_dataset(_write_toy())
    stacks = traj.stacks(np.array([0, 2, 3, 4]))  # (4, 4, 84, 84)
    assert [list(s[:, 0, 0]) for s in stacks] == [[0, 0, 0, 0], [0, 0, 1, 2], [100] * 4, [100, 100, 100, 101]]


def test_windows_are_left_padded_within_one_episode():
    traj = data.Trajectories.from_dataset(_write_toy())
    b = traj.sample(64, 3, np.random.default_rng(0), torch.device("cpu"))
    assert b.frames.shape == (64, 3, 4, 84, 84) and b.frames.dtype == torch.uint8
    for i in range(64):
        m = b.mask[i]
        assert m[-1] and list(m) == sorted(m.tolist())  # padding only on the left
        real = b.timesteps[i][m]
        assert torch.equal(real, torch.arange(int(real[0]), int(real[0]) + len(real)))
        assert int(real[0]) == 0 or m.all()  # a window starts at its episode's start or is full
        assert (b.rtg[i][~m] == 0).all() and (b.actions[i][~m] == 0).all()


def test_value_targets_discount_the_rewards_within_each_episode():
    """Toy rewards (1, 0, 2) then (-1, -1), gamma 0.1: G = (1 + 0.1*0 + 0.01*2, 0 + 0.1*2, 2) = (1.02, 0.2, 2)
    and (-1.1, -1); gamma 1 gives the return-to-go (3, 2, 2) and (-2, -1).  The DT's rtg input is unchanged."""
    name = _write_toy()
    discounted = data.Trajectories.from_dataset(name, value_gamma=0.1)
    plain = data.Trajectories.from_dataset(name)
    assert np.allclose(discounted.value_targets, [1.02, 0.2, 2.0, -1.1, -1.0])
    assert np.allclose(plain.value_targets, [3.0, 2.0, 2.0, -2.0, -1.0]) and np.array_equal(plain.rtg, discounted.rtg)
    b = discounted.sample(16, 3, np.random.default_rng(0), torch.device("cpu"))
    first_step = b.mask & (b.timesteps == 0)
    assert torch.allclose(b.returns[first_step], torch.where(b.rtg[first_step] > 0, 1.02, -1.1))
    with pytest.raises(ConfigError, match="--adv-gamma must be in"):
        resolve(DTConfig(dataset=name, adv_gamma=0.0))


def test_bad_datasets_give_one_line_errors():
    with pytest.raises(ConfigError, match="no local Minari dataset 'missing-v0'"):
        data.load("missing-v0")
    _write_toy("breakout-v0", env_id="ALE/Breakout-v5")
    cfg = resolve(DTConfig(env="ALE/Pong-v5", dataset="breakout-v0", algo="dt", grad_steps=1))
    with pytest.raises(ConfigError, match="collected on ALE/Breakout-v5"):
        DTTrainer(cfg, "/tmp/unused")
    with pytest.raises(ConfigError, match="--dataset NAME is required"):
        resolve(DTConfig())
    with pytest.raises(ConfigError, match="unknown --algo"):
        resolve(DTConfig(dataset="x", algo="dtt"))


def test_collect_rejects_bad_names_and_unused_policies_before_playing(capsys, tmp_path):
    base = ["dataset", "collect", "--env", "ALE/Pong-v5", "--steps", "10"]
    assert main([*base, "--policy", str(tmp_path), "--name", "pong_mixed"]) == 2
    assert "not a Minari dataset id" in capsys.readouterr().err
    assert main([*base, "--policy", str(tmp_path), "--policy", str(tmp_path), "--num-envs", "1",
                 "--name", "pong/x-v0"]) == 2
    assert "smaller than the 2 policies" in capsys.readouterr().err
    assert main([*base, "--policy", str(tmp_path), "--name", "pong/x-v0"]) == 2
    assert "expected a run directory" in capsys.readouterr().err


def test_dapo_dt_loss_weights_and_value_head(tmp_path):
    _write_toy()
    dt = DTTrainer(resolve(DTConfig(dataset="toy-v0", algo="dt", context_len=3, n_embd=16, grad_steps=1)), tmp_path)
    dapo = DTTrainer(resolve(DTConfig(dataset="toy-v0", algo="dapo-dt", context_len=3, n_embd=16, grad_steps=1)),
                     tmp_path)
    assert dt.model.value_head is None and dt.model.film is None
    assert dapo.model.value_head is not None and dapo.model.film is not None
    m_dt, m_dapo = dt.train_step(), dapo.train_step()
    assert "train/value_loss" not in m_dt and m_dt["train/weight_mean"] == 1.0
    assert m_dapo["train/value_loss"] > 0 and m_dapo["train/weight_max"] <= 20.0
    assert dt.scale == 3.0 and dt.target_return == 3.0  # largest |episode return|, best episode


def _seeded_dapo_dt(tmp_path, **overrides) -> tuple[DTTrainer, Tensor, dict]:
    """A tiny seeded DAPO-DT (no dropout) on the toy dataset, its offline loss and metrics on a fixed batch."""
    torch.manual_seed(0)
    cfg = DTConfig(dataset="toy-v0", algo="dapo-dt", context_len=3, n_embd=16, grad_steps=1, dropout=0.0, **overrides)
    tr = DTTrainer(resolve(cfg), tmp_path)
    return tr, *tr.offline_loss(tr.data.sample(4, 3, np.random.default_rng(0), tr.device))


def _dapo_dt_metrics(tmp_path, **overrides) -> dict:
    return _seeded_dapo_dt(tmp_path, **overrides)[2]


def _dapo_dt_after_backward(tmp_path, **overrides) -> DTTrainer:
    """The seeded DAPO-DT after one offline loss's backward pass on the fixed batch."""
    tr, loss, _ = _seeded_dapo_dt(tmp_path, **overrides)
    loss.backward()
    return tr


@pytest.mark.parametrize("trains_encoder", [False, True])
def test_value_loss_reaches_the_cnn_only_when_asked(tmp_path, trains_encoder):
    """The CNN's gradient with value_coef 1 equals its gradient with value_coef 0 (imitation alone)
    exactly when the value head reads stop-gradient features."""
    _write_toy()
    grads = []
    for value_coef in (0.0, 1.0):
        tr = _dapo_dt_after_backward(tmp_path, value_coef=value_coef, value_trains_encoder=trains_encoder)
        grads.append(torch.cat([p.grad.flatten() for p in tr.model.embed_state.parameters()]))
    assert grads[0].abs().sum() > 0
    assert torch.equal(grads[0], grads[1]) != trains_encoder


def test_online_clipped_loss_follows_the_offline_value_rules(tmp_path):
    """Online DAPO-DT: the value loss reaches the imitation CNN only with value_trains_encoder (the same
    CNN gradient with value_coef 0 and 1 otherwise), and the update clips the value head apart."""
    from dapo_dt.online import _clipped_loss, _evaluate

    _write_toy()
    for trains_encoder in (False, True):
        grads = []
        for value_coef in (0.0, 1.0):
            tr = _seeded_dapo_dt(tmp_path, value_coef=value_coef, value_trains_encoder=trains_encoder)[0]
            b = tr.data.sample(4, 3, np.random.default_rng(1), tr.device)
            tr.model.eval()
            with torch.no_grad():
                logp_old, _ = _evaluate(tr, b)
            loss, metrics = _clipped_loss(tr, b, logp_old, torch.ones_like(logp_old))
            assert metrics["value_loss"] > 0
            loss.backward()
            grads.append(torch.cat([p.grad.flatten() for p in tr.model.embed_state.parameters()]))
        assert grads[0].abs().sum() > 0
        assert torch.equal(grads[0], grads[1]) != trains_encoder


def test_separate_value_encoder_is_trained_by_the_value_loss_alone(tmp_path):
    """--separate-value-encoder: the imitation CNN's gradient is the same with value_coef 0 and 1, V's own
    CNN is clipped with the value head, and sharing the imitation CNN at the same time is refused."""
    _write_toy()
    grads = []
    for value_coef in (0.0, 1.0):
        tr = _dapo_dt_after_backward(tmp_path, value_coef=value_coef, separate_value_encoder=True)
        grads.append(torch.cat([p.grad.flatten() for p in tr.model.embed_state.parameters()]))
    assert torch.equal(grads[0], grads[1]) and grads[0].abs().sum() > 0
    assert all(any(p is q for q in tr.value_params) for p in tr.model.value_cnn.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in tr.model.value_cnn.parameters())
    with pytest.raises(ConfigError, match="excludes --separate-value-encoder"):
        resolve(DTConfig(dataset="toy-v0", algo="dapo-dt", separate_value_encoder=True, value_trains_encoder=True))


def test_value_gradients_do_not_scale_the_imitation_step(tmp_path):
    """With a stop-gradient value head, the clipped imitation gradients are the same whatever the value
    loss's size: the value head's norm is clipped on its own (a common clip would shrink them)."""
    _write_toy()
    grads = []
    for value_coef in (0.0, 1000.0):
        tr = _dapo_dt_after_backward(tmp_path, value_coef=value_coef, max_grad_norm=0.01)
        norms = tr.clip_gradients()
        grads.append(torch.cat([p.grad.flatten() for p in tr.imitation_params if p.grad is not None]))
    assert norms["train/value_grad_norm"] > 0.01  # the value head's own clip was active
    assert torch.equal(grads[0], grads[1])


def test_critic_trust_hand_computed():
    """Real tokens: V = (1, 2, 3) against G = (1, 2, 5): residuals (0, 0, 2) have variance 8/9, G has 26/9,
    so EV = 1 - 8/26 = 9/13; the padded first token (V 9, G 0) is ignored.  A constant G or a critic worse
    than the mean (EV < 0) gives trust 0."""
    mask = torch.tensor([[False, True, True, True]])
    target = torch.tensor([[0.0, 1.0, 2.0, 5.0]])
    assert float(critic_trust(torch.tensor([[9.0, 1.0, 2.0, 3.0]]), target, mask)) == pytest.approx(9 / 13)
    assert float(critic_trust(target, target, mask)) == 1.0
    assert float(critic_trust(-target, target, mask)) == 0.0
    assert float(critic_trust(target, torch.full((1, 4), 2.0), mask)) == 0.0


@pytest.mark.parametrize("trust", [0.0, 1.0])
def test_ev_gated_weights_follow_the_critic_trust(tmp_path, monkeypatch, trust):
    """With --ev-gated-weights, a critic with trust 0 leaves the action loss unweighted (exactly DAPO-DT
    without advantage weighting) and trust 1 gives the ungated exp(A/T) weights."""
    _write_toy()
    monkeypatch.setattr(dt_trainer, "critic_trust", lambda v, g, m: torch.tensor(trust))
    batch_loss = {name: _dapo_dt_metrics(tmp_path, **kw)["train/action_loss"] for name, kw in
                  {"unweighted": dict(advantage_weighting=False), "ungated": {}, "gated": dict(ev_gated_weights=True)}.items()}
    assert batch_loss["ungated"] != batch_loss["unweighted"]  # the toy batch's weights are not uniform
    assert batch_loss["gated"] == batch_loss["unweighted" if trust == 0.0 else "ungated"]


def test_value_head_learns_the_discounted_return_with_adv_gamma(tmp_path):
    """The value loss is measured against the batch's discounted returns, so the same seeded model and batch
    give another value loss with --adv-gamma 0.1 than with the return-to-go (gamma 1)."""
    _write_toy()
    v_loss = {gamma: _dapo_dt_metrics(tmp_path, adv_gamma=gamma)["train/value_loss"] for gamma in (1.0, 0.1)}
    assert v_loss[1.0] != pytest.approx(v_loss[0.1])


def test_masked_normalise_ignores_padding():
    x = torch.tensor([[9.0, 1.0, 3.0]])
    mask = torch.tensor([[False, True, True]])
    out = masked_normalise(x, mask)
    # real entries 1 and 3: mean 2, unbiased std sqrt(2)
    assert torch.allclose(out, torch.tensor([[0.0, -1 / 2**0.5, 1 / 2**0.5]]), atol=1e-6)


def test_adaptive_clip_follows_the_kl():
    assert adapt_clip(0.2, kl=0.1, kl_target=0.01) == pytest.approx(0.2 / 1.5)
    assert adapt_clip(0.2, kl=0.001, kl_target=0.01) == pytest.approx(0.3)
    assert adapt_clip(0.2, kl=0.01, kl_target=0.01) == 0.2
    assert adapt_clip(CLIP_BOUNDS[1], kl=0.0, kl_target=0.01) == CLIP_BOUNDS[1]


def test_human_normalised_scores():
    assert human_normalised("ALE/Pong-v5", 9.3) == pytest.approx(1.0)
    assert human_normalised("ALE/Breakout-v5", 1.7) == pytest.approx(0.0)
    assert np.isnan(human_normalised("ALE/Tennis-v5", 0.0))


@pytest.mark.slow
@pytest.mark.parametrize("envpool", ["installed", "hidden"])
def test_collect_train_eval_end_to_end(tmp_path, capsys, monkeypatch, envpool):
    """A 256-step Pong PPO run as behaviour policy -> a Minari dataset of whole games -> DAPO-DT offline +
    online -> evaluation, all through the CLI; on EnvPool and, with it hidden, on ale-py (core/envs/atari.py)."""
    if envpool == "hidden":
        monkeypatch.setitem(sys.modules, "envpool", None)
    else:
        pytest.importorskip("envpool")
    policy = tmp_path / "ppo"
    assert main(["run", "--env", "ALE/Pong-v5", "--algo", "ppo", "--total-steps", "256", "--num-envs", "2",
                 "--num-steps", "64", "--snapshot-every", "128", "--eval-episodes", "0", "--no-progress",
                 "--no-tensorboard", "--run-dir", str(policy)]) == 0
    assert main(["dataset", "collect", "--env", "ALE/Pong-v5", "--policy", str(policy), "--policy",
                 str(policy / "snapshots" / "step_000000128.pt"), "--epsilon", "0.3", "--steps", "500",
                 "--name", "pong/tiny-v0", "--num-envs", "2"]) == 0
    out = capsys.readouterr().out
    assert "episodes:" in out and "env_id: ALE/Pong-v5" in out
    assert main(["dataset", "collect", "--env", "ALE/Pong-v5", "--policy", str(policy), "--steps", "10",
                 "--name", "pong/tiny-v0"]) == 2  # exists already
    run = tmp_path / "dapo_dt"
    assert main(["run", "--algo", "dapo-dt", "--env", "ALE/Pong-v5", "--dataset", "pong/tiny-v0",
                 "--grad-steps", "4", "--eval-every", "2", "--context-len", "8", "--n-embd", "32", "--batch-size", "4",
                 "--eval-episodes", "1", "--eval-max-steps", "200", "--online-steps", "100", "--online-envs", "1",
                 "--run-dir", str(run), "--no-progress"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["grad_steps"] > 4 and summary["online_env_steps"] >= 100
    assert len(summary["eval_scores"]) == 1 and (run / "learning_curve.png").exists()
    capsys.readouterr()
    import minari

    minari.delete_dataset("pong/tiny-v0")  # evaluation needs only the run directory
    assert main(["eval", str(run), "--episodes", "1"]) == 0
    assert "eval_return_mean" in capsys.readouterr().out


def _fake_dt_run(runs, variant, frac, seed, steps, scores):
    """A finished dt_benchmark run directory on Pong: ``eval/return_mean`` = ``scores`` at ``steps``."""
    from core.training.logging import MetricLogger
    from experiments.dt_benchmark import run_path

    d = run_path(runs, "ALE/Pong-v5", variant, frac, seed)
    d.mkdir(parents=True)
    log = MetricLogger(d, tensorboard=False)
    for step, score in zip(steps, scores):
        log.log(step, {"eval/return_mean": score})
    (d / "summary.json").write_text(json.dumps({
        "seed": seed, "dataset_steps": 5, "grad_steps": steps[-1], "online_env_steps": 0, "wall_time_s": 1.0,
        "eval_return_mean": scores[-1], "human_normalised": human_normalised("ALE/Pong-v5", scores[-1])}))


def test_dt_benchmark_report_on_synthetic_runs(tmp_path):
    """The report's table, steps-to-DT's-final-score ratio and plots, from hand-made run directories:
    DT reaches 4.0 at step 20; DAPO-DT reaches it at step 10 -> ratio 0.5."""
    from experiments.dt_benchmark import report

    _write_toy()
    curves = {"dt": [1.0, 4.0], "dapo-dt": [4.0, 5.0]}
    for algo, scores in curves.items():
        for seed, frac in ((1, 1.0), (2, 1.0), (1, 0.5), (2, 0.5)):
            _fake_dt_run(tmp_path / "runs", algo, frac, seed, (10, 20), scores)
    report(tmp_path, tmp_path / "runs", {"ALE/Pong-v5": "toy-v0"}, [1, 2], [0.5, 1.0], "test")
    md = (tmp_path / "results.md").read_text()
    assert "| dt | 1 | 2 | 4.00 +- 0.00 |" in md and "| dapo-dt | 1 | 2 | 5.00 +- 0.00 |" in md
    assert "DT 20, DAPO-DT 10 (ratio 0.50" in md
    assert "| dt | 0.5 | 2 | 4.00 +- 0.00 |" in md
    assert (tmp_path / "ALE-Pong-v5_score_vs_grad_steps.png").exists()
    assert (tmp_path / "ALE-Pong-v5_score_vs_dataset_size.png").exists()


def test_dt_benchmark_report_skips_the_ratio_at_random_play(tmp_path):
    """DT ending at -20.5 on Pong (human-normalised 0.007, random play is -20.7): any DAPO-DT curve
    'reaches' that score, so the report says the ratio is not measured instead of printing one."""
    from experiments.dt_benchmark import report

    _write_toy()
    for algo, scores in {"dt": [-20.625, -20.5], "dapo-dt": [-20.5, -20.625]}.items():
        _fake_dt_run(tmp_path / "runs", algo, 1.0, 1, (250, 500), scores)
    report(tmp_path, tmp_path / "runs", {"ALE/Pong-v5": "toy-v0"}, [1], [1.0], "test")
    md = (tmp_path / "results.md").read_text()
    assert "not measured, DT ends at the random-play level (human-normalised 0.007 < 0.05)" in md
    assert "ratio" not in md.split("Gradient steps to")[1]


def test_dt_benchmark_report_says_when_dapo_dt_never_reaches_dt(tmp_path):
    """DT ends at +1.0; DAPO-DT's best is -6.0, so there is no step count and no ratio to print."""
    from experiments.dt_benchmark import report

    _write_toy()
    for algo, scores in {"dt": [-9.5, 1.0], "dapo-dt": [-20.0, -6.0]}.items():
        _fake_dt_run(tmp_path / "runs", algo, 1.0, 1, (1000, 2000), scores)
    report(tmp_path, tmp_path / "runs", {"ALE/Pong-v5": "toy-v0"}, [1], [1.0], "test")
    md = (tmp_path / "results.md").read_text()
    assert "DT 2000, DAPO-DT never within 2000 (no ratio)" in md and "nan" not in md


def test_dt_benchmark_report_ranks_every_ablation_against_dt_and_keeps_notes(tmp_path):
    """Each DAPO-DT variant gets its own steps-to-DT's-score ratio (DT reaches 2.0 at step 300; the
    no-weighting ablation at 100 -> 0.33, the no-modulation one never), and regenerating the report keeps
    the hand-written notes under the marker."""
    from experiments.dt_benchmark import report
    from experiments.notes import NOTES_MARKER

    _write_toy()
    curves = {"dt": [-5.0, 0.0, 2.0], "dapo-dt-no-weighting": [3.0, 1.0, 2.5], "dapo-dt-no-modulation": [-9.0, -4.0, 1.0]}
    for variant, scores in curves.items():
        _fake_dt_run(tmp_path / "runs", variant, 1.0, 1, (100, 200, 300), scores)
    _fake_dt_run(tmp_path / "runs", "dt", 1.0, 2, (100, 200, 300), curves["dt"])  # DT's mean curve unchanged
    variants = list(curves)
    report(tmp_path, tmp_path / "runs", {"ALE/Pong-v5": "toy-v0"}, [1, 2], [1.0], "test", variants)
    md = tmp_path / "results.md"
    assert "| dapo-dt-no-modulation | 1 | 1 | 1.00 | " in md.read_text()  # one seed: no spread
    assert ("DT 300, dapo-dt-no-weighting 100 (ratio 0.33, seeds [1], not DT's), dapo-dt-no-modulation never "
            "within 300 (no ratio, seeds [1], not DT's)" in md.read_text())
    assert "| dapo-dt-no-modulation | 1 | -9.00 | -4.00 | +1.00 |" in md.read_text()
    assert "| dt | 1, 2 | -5.00 | +0.00 | +2.00 |" in md.read_text()
    md.write_text(md.read_text() + f"\n{NOTES_MARKER}\nSeed 1 only: a hand-written note.\n")
    report(tmp_path, tmp_path / "runs", {"ALE/Pong-v5": "toy-v0"}, [1, 2], [1.0], "test again", variants)
    text = md.read_text()
    assert "Command: `test again`" in text and text.count("| dt | 1 | 2 |") == 1
    assert text.endswith(f"{NOTES_MARKER}\nSeed 1 only: a hand-written note.\n")
