"""The shared trainer: determinism, exact resume, and the health remedies wired into it."""
import csv
import dataclasses
import math

import numpy as np
import pytest
import torch

from core.config.errors import ConfigError
from core.algo import schedules
from core.training.checkpoint import load_checkpoint
from core.training.logging import MetricLogger
from core.envs.rollout import Episode
from core.extensions.kl_adaptive_lr import KLAdaptiveScale
from core.extensions.noise_floor import NoiseFloorOptions, floor_at
from core.training.trainer import Trainer


def _params(trainer):
    return [p.detach().clone() for p in list(trainer.actor.parameters()) + list(trainer.critic.parameters())]


def _rows(path):
    with open(path, newline="") as f:
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in csv.DictReader(f)]


@pytest.mark.parametrize("algo,overlap", [("ppo", False), ("grpo", False), ("dapo", False), ("dapo", True)])
def test_same_seed_same_result_on_cpu(tmp_path, small_config, algo, overlap):
    runs = []
    for name in ("a", "b"):
        cfg = small_config(tmp_path / name, algo=algo, total_steps=768, overlap=overlap)
        (tmp_path / name).mkdir()
        t = Trainer(cfg, tmp_path / name)
        t.train(MetricLogger(tmp_path / name, tensorboard=False))
        runs.append(t)
    assert all(torch.equal(a, b) for a, b in zip(_params(runs[0]), _params(runs[1])))
    other = small_config(tmp_path / "c", algo=algo, total_steps=768, seed=2, overlap=overlap)
    (tmp_path / "c").mkdir()
    t = Trainer(other, tmp_path / "c")
    t.train(MetricLogger(tmp_path / "c", tensorboard=False))
    assert not all(torch.equal(a, b) for a, b in zip(_params(runs[0]), _params(t)))


@pytest.mark.parametrize("algo,env,extra", [
    ("dapo", "CartPole-v1", {"temperature_mode": "learnable", "importance_correction": True}),
    ("grpo", "CartPole-v1", {}),
    ("dapo", "Pendulum-v1", {"num_envs": 2, "num_steps": 64, "num_minibatches": 4}),
    ("ppo", "CartPole-v1", {"overlap": True}),
    ("dapo", "CartPole-v1", {"extensions": {"kl_adaptive_lr": {"target": 1e-4}}}),  # the KL scale is state
    ("dapo", "CartPole-v1", {"dynamic_sampling": False,  # PufferLib's segments: their draws and annealed beta
                             "extensions": {"prioritized_segments": {"segment_length": 16}}}),
    ("dapo", "Pendulum-v1", {"num_envs": 2, "num_steps": 64, "num_minibatches": 4, "hidden_sizes": (48, 32),
                             "overlap": True}),  # other widths, also in the collector process
    ("grpo", "Humanoid-v5", {"num_steps": 32}),  # body positions read before stepping
    ("ppo", "Ant-v5", {"num_steps": 32}),
])
def test_resumed_run_equals_uninterrupted(tmp_path, small_config, algo, env, extra):
    """Stop after 3 updates, reload the checkpoint into a fresh Trainer, finish: same weights, same metrics."""
    full_dir, split_dir = tmp_path / "full", tmp_path / "split"
    full_dir.mkdir(), split_dir.mkdir()
    cfg = small_config(full_dir, algo=algo, env=env, total_steps=8 * 256 if env == "CartPole-v1" else 8 * 128, **extra)
    full = Trainer(cfg, full_dir)
    widths = [m.out_features for m in full.critic.net if isinstance(m, torch.nn.Linear)]
    assert widths == [*cfg.hidden_sizes, 1]
    full.train(MetricLogger(full_dir, tensorboard=False))

    cfg_split = cfg.__class__(**{**cfg.__dict__, "run_dir": str(split_dir)})
    first = Trainer(cfg_split, split_dir)
    first.train(MetricLogger(split_dir, tensorboard=False), max_iterations=3)
    del first
    state = load_checkpoint(split_dir / "checkpoint.pt")
    assert state["iteration"] == 3
    resumed = Trainer(cfg_split, split_dir, state)
    resumed.train(MetricLogger(split_dir, resume_step=resumed.global_step, tensorboard=False))

    assert resumed.global_step == full.global_step
    assert all(torch.equal(a, b) for a, b in zip(_params(full), _params(resumed)))
    assert _rows(full_dir / "metrics.csv") == _rows(split_dir / "metrics.csv")


def test_non_finite_loss_is_skipped_and_weights_restored(tmp_path, small_config):
    cfg = small_config(tmp_path)
    t = Trainer(cfg, tmp_path)
    t.iterate()
    healthy = _params(t)
    t.sampler.data.returns[0] = float("nan")  # poison one value target
    t.update(0.2, 0.2, 0.5)
    assert t.health_counts["non_finite"] == 1
    assert t.health_events[-1]["event"] == "non_finite"
    assert all(torch.equal(a, b) for a, b in zip(healthy, _params(t)))
    assert all(torch.isfinite(p).all() for p in _params(t))


def test_collapse_remedy_restores_best_actor_and_widens_clip(tmp_path, small_config):
    cfg = small_config(tmp_path, collapse_window=2)
    t = Trainer(cfg, tmp_path)
    t._watch_health([Episode(10.0, 10), Episode(10.0, 10)], 1.0)      # first mean 10
    t._watch_health([Episode(100.0, 100), Episode(100.0, 100)], 1.0)  # new best 100 -> snapshot
    best = {k: v.clone() for k, v in t.actor.state_dict().items()}
    with torch.no_grad():
        for p in t.actor.parameters():
            p.add_(1.0)                                  # a "bad update"
    low_before, _, _ = t.clip_ranges()
    t._watch_health([Episode(12.0, 12), Episode(12.0, 12)], 1.0)      # lost > 70% of the gain
    assert t.health_counts["policy_collapse"] == 1
    assert all(torch.equal(best[k], v) for k, v in t.actor.state_dict().items())
    assert t.clip_ranges()[0] == pytest.approx(1.5 * low_before)
    # the monitor starts over from the restored policy, so a second collapse needs a new gain first; it
    # restores the new best snapshot but does not widen the clip further
    t._watch_health([Episode(10.0, 10), Episode(10.0, 10)], 1.0)      # the restored policy's first window: new start
    t._watch_health([Episode(100.0, 100), Episode(100.0, 100)], 1.0)  # new best 100 -> snapshot (the restored weights)
    with torch.no_grad():
        for p in t.actor.parameters():
            p.add_(1.0)
    t._watch_health([Episode(12.0, 12), Episode(12.0, 12)], 1.0)
    assert t.health_counts["policy_collapse"] == 2
    assert all(torch.equal(best[k], v) for k, v in t.actor.state_dict().items())
    assert t.clip_ranges()[0] == pytest.approx(1.5 * low_before)


def test_collapse_confirm_reaches_the_trainer(tmp_path, small_config):
    """--collapse-confirm 1: the falls alone leave the actor alone; a second fresh window with them restores it."""
    t = Trainer(small_config(tmp_path, collapse_window=2, collapse_confirm=1), tmp_path)
    t._watch_health([Episode(10.0, 10), Episode(10.0, 10)], 1.0)
    t._watch_health([Episode(100.0, 100), Episode(100.0, 100)], 1.0)
    t._watch_health([Episode(12.0, 12), Episode(12.0, 12)], 1.0)
    assert t.health_counts["policy_collapse"] == 0
    t._watch_health([Episode(12.0, 12), Episode(12.0, 12)], 1.0)
    assert t.health_counts["policy_collapse"] == 1


def test_divergence_remedy_lowers_critic_lr_and_widens_eps_v(tmp_path, small_config):
    cfg = small_config(tmp_path, divergence_window=3, divergence_factor=5.0)
    t = Trainer(cfg, tmp_path)
    _, lr_v_before = t._set_learning_rates()
    eps_v_before = t.clip_ranges()[2]
    for loss in (1.0, 3.0, 9.0, 27.0):
        t._watch_health([], loss)
    assert t.health_counts["value_divergence"] == 1
    assert t._set_learning_rates()[1] == pytest.approx(0.5 * lr_v_before)
    assert t.clip_ranges()[2] == pytest.approx(1.2 * eps_v_before)


def test_monitors_silent_on_a_healthy_run(tmp_path, small_config):
    cfg = small_config(tmp_path, total_steps=20_000)
    t = Trainer(cfg, tmp_path)
    t.train(MetricLogger(tmp_path, tensorboard=False))
    assert t.health_counts["non_finite"] == 0 and t.health_counts["value_divergence"] == 0


def test_algorithms_differ_only_by_config(tmp_path, small_config):
    """ppo: symmetric clip, no value clip; grpo: value clipped with the policy eps; dapo: eps_V schedule."""
    ppo = Trainer(small_config(tmp_path / "p", algo="ppo"), tmp_path)
    grpo = Trainer(small_config(tmp_path / "g", algo="grpo"), tmp_path)
    dapo = Trainer(small_config(tmp_path / "d", algo="dapo", clip_eps_high=0.28), tmp_path)
    assert ppo.clip_ranges() == (0.2, 0.2, None)
    assert grpo.clip_ranges() == (0.2, 0.2, 0.2)
    assert dapo.clip_ranges() == (0.2, 0.28, 0.5)
    dapo.global_step = dapo.cfg.total_steps
    assert dapo.clip_ranges()[2] == pytest.approx(0.3)
    assert dapo.sampler.dynamic and not ppo.sampler.dynamic
    assert dapo._set_learning_rates() == (0.0, 0.0)  # annealed to zero at the end
    assert math.isclose(ppo._set_learning_rates()[1], ppo.cfg.lr)


def test_overlap_learns_from_one_update_old_data(tmp_path, small_config):
    """With double buffering the next rollout is collected by a frozen pre-update copy of the actor, so its
    stored log-probs are the behaviour policy's, not the live actor's (the ratio corrects the lag)."""
    cfg = small_config(tmp_path, overlap=True, total_steps=4096)
    t = Trainer(cfg, tmp_path)
    t.iterate()
    rollout, _, _ = t.rollouts.pending
    with torch.no_grad():
        live, _ = t.actor.evaluate(rollout.obs.reshape(-1, rollout.obs.shape[-1]), rollout.actions.reshape(-1))
    assert not torch.allclose(live, rollout.logp.reshape(-1))
    with torch.no_grad():
        old_actor = t.rollouts.behaviour[0]
        stored, _ = old_actor.evaluate(rollout.obs.reshape(-1, rollout.obs.shape[-1]), rollout.actions.reshape(-1))
    assert torch.allclose(stored, rollout.logp.reshape(-1))  # the frozen pre-update copy collected it


def test_proximal_clip_anchors_the_update_on_the_live_policy(tmp_path, small_config):
    """The proximal_clip extension with --overlap: from the second update on the data lag one update (lag_kl > 0);
    without stale data it is refused in one line; --overlap adds it unless it is turned off."""
    cfg = small_config(tmp_path, overlap=True, total_steps=4 * 256)
    assert "proximal_clip" in cfg.extensions  # added by --overlap
    t = Trainer(cfg, tmp_path)
    first, second = t.iterate(), t.iterate()
    assert abs(first["train/lag_kl"]) < 1e-6  # the live policy collected the first rollout (NumPy vs torch rounding)
    assert second["train/lag_kl"] > 1e-4
    with pytest.raises(ConfigError, match="proximal_clip re-anchors stale data.*add --overlap or a --window"):
        Trainer(small_config(tmp_path, extensions={"proximal_clip": {}}), tmp_path)
    assert "proximal_clip" in small_config(tmp_path, extensions={"proximal_clip": {}}, window=512).extensions
    assert "proximal_clip" not in small_config(tmp_path).extensions
    assert "proximal_clip" not in small_config(tmp_path, overlap=True, extensions={"proximal_clip": None}).extensions


def test_kl_adaptive_lr_rule_by_hand():
    """target 0.01: KL 0.03 > 0.02 divides by 1.5, 0.004 < 0.005 multiplies, 0.01 keeps; clamped."""
    rule = KLAdaptiveScale(0.01, factor=1.5, lowest=0.5, highest=2.0)
    assert [rule.observe(kl) for kl in (0.03, 0.01, 0.004, 0.004, 0.004, float("nan"), 0.05, 0.05, 0.05, 0.05)] == \
        pytest.approx([2 / 3, 2 / 3, 1.0, 1.5, 2.0, 2.0, 4 / 3, 8 / 9, 16 / 27, 0.5])
    with pytest.raises(ValueError, match="target must be > 0"):
        KLAdaptiveScale(0.0)
    brake = KLAdaptiveScale(0.01, highest=1.0)  # max_scale 1: slows down, never speeds past the lr
    assert [brake.observe(kl) for kl in (0.001, 0.03, 0.03, 0.001, 0.001, 0.001)] == \
        pytest.approx([1.0, 2 / 3, 4 / 9, 2 / 3, 1.0, 1.0])


def _kl(target, max_scale=10.0):
    return {"kl_adaptive_lr": {"target": target, "max_scale": max_scale}}


@pytest.mark.parametrize("ext,scales", [(_kl(1e-9), [1, 1 / 1.5, 1 / 1.5 ** 2]), ({}, [1, 1, 1])])
def test_kl_adaptive_lr_scales_only_the_policy_lr(tmp_path, small_config, ext, scales):
    """A tiny target (every update's KL exceeds it) shrinks the policy lr by 1.5 per update, no extension keeps
    it; the critic's stays."""
    cfg = small_config(tmp_path, algo="dapo", extensions=ext, anneal_lr=False, total_steps=3 * 256)
    t = Trainer(cfg, tmp_path)
    t.train(MetricLogger(tmp_path, tensorboard=False))
    rows = _rows(tmp_path / "metrics.csv")
    assert [float(r["train/lr_policy"]) for r in rows] == pytest.approx([cfg.lr * k for k in scales])
    assert [float(r["train/lr_value"]) for r in rows] == pytest.approx([cfg.critic_lr] * 3)


def test_a_kl_brake_that_never_acts_leaves_the_run_unchanged(tmp_path, small_config):
    """With max_scale 1 and every update's KL below twice the target the scale stays 1, and the run is the run
    without the extension, value for value (why DAPO's MuJoCo brake changes nothing where KL stays below 0.1)."""
    curves = {}
    for name, ext in (("off", {}), ("idle-brake", _kl(1e3, 1.0))):
        (run := tmp_path / name).mkdir()
        cfg = small_config(run, algo="dapo", extensions=ext, total_steps=3 * 256)
        Trainer(cfg, run).train(MetricLogger(run, tensorboard=False))
        curves[name] = [{k: v for k, v in r.items() if not k.startswith("time/")}
                        for r in _rows(run / "metrics.csv")]
    assert curves["idle-brake"] == curves["off"]


@pytest.mark.parametrize("max_scale,scales", [(10.0, [1, 1.5, 1.5 ** 2]), (1.0, [1, 1, 1])])
def test_kl_lr_max_scale_bounds_the_raise(tmp_path, small_config, max_scale, scales):
    """A huge target (every KL below half of it) raises the policy lr by 1.5 per update, unless capped at 1."""
    cfg = small_config(tmp_path, algo="dapo", extensions=_kl(1e3, max_scale), anneal_lr=False, total_steps=3 * 256)
    Trainer(cfg, tmp_path).train(MetricLogger(tmp_path, tensorboard=False))
    assert [float(r["train/lr_policy"]) for r in _rows(tmp_path / "metrics.csv")] == \
        pytest.approx([cfg.lr * k for k in scales])
    with pytest.raises(ConfigError, match="max_scale must be at least 1"):
        small_config(tmp_path, extensions=_kl(0.01, 0.5))


def test_collapse_restore_refits_the_actor_to_the_moved_normaliser(tmp_path, small_config):
    """The restored actor must be the best policy of the raw observation, although the observation
    normaliser's statistics moved on after the best snapshot (the critic keeps the current ones)."""
    cfg = small_config(tmp_path, env="Pendulum-v1", num_envs=2, num_steps=64, collapse_window=2, norm_obs=True,
                       collapse_confirm=0)
    t = Trainer(cfg, tmp_path)
    t.iterate()  # real statistics
    t._watch_health([Episode(10.0, 10), Episode(10.0, 10)], 1.0)
    t._watch_health([Episode(100.0, 100), Episode(100.0, 100)], 1.0)  # new best -> snapshot of actor and statistics
    raw = np.random.default_rng(0).normal(0.0, 1.0, (32, 3))
    best = t.actor.mode(torch.as_tensor(t.obs_norm(raw)))
    t.iterate()
    t.iterate()  # the actor and the statistics move on
    assert not np.allclose(t.obs_norm.state_dict()["mean"], t.health.best[0]["obs_norm"]["mean"])
    t._watch_health([Episode(12.0, 12), Episode(12.0, 12)], 1.0)  # collapse -> restore
    assert t.health_counts["policy_collapse"] == 1
    assert torch.allclose(t.actor.mode(torch.as_tensor(t.obs_norm(raw))), best, atol=1e-5)


def test_log_std_init_reaches_the_trainers_gaussian_actor(tmp_path, small_config):
    cfg = small_config(tmp_path, env="Pendulum-v1", num_envs=2, log_std_init=-0.5)
    t = Trainer(cfg, tmp_path)
    assert torch.equal(t.actor.log_std.detach(), torch.full((1,), -0.5))
    with pytest.raises(ConfigError, match="--log-std-init"):
        small_config(tmp_path, env="Pendulum-v1", num_envs=2, log_std_init=5.0)


@pytest.mark.parametrize("numpy_update", [True, False])  # the NumPy fast path and the torch update
def test_dapo_with_a_joint_gradient_clip_trains_exactly_like_grpo(tmp_path, small_config, numpy_update):
    """On MuJoCo's DAPO settings (GRPO's lambda rule, eps_V = clip_eps = 0.2, uniform minibatches; the KL brake
    given to both) the only update difference left from GRPO is the per-network gradient clip (the health monitors
    only act when they fire): with --joint-grad-clip the run is GRPO's, value for value; without it, it is not."""
    from core.run.runner import run_experiment

    common = dict(env="Pendulum-v1", num_envs=1, num_steps=256, total_steps=1024, num_minibatches=8, auto_lambda=True,
                  dynamic_sampling=False, log_std_init=-1.0, numpy_update=numpy_update,
                  extensions={**_kl(1e-6, 1.0), "noise_floor": None})  # no floor (it would hold the noise up)
    dapo_only = dict(health_monitors=False, eps_v_start=0.2, eps_v_schedule="constant")
    curves = {}
    for name, algo, joint in (("grpo", "grpo", None), ("dapo-joint", "dapo", True), ("dapo", "dapo", False)):
        run_experiment(small_config(tmp_path / name, algo=algo, joint_grad_clip=joint, **common,
                                    **(dapo_only if algo == "dapo" else {})))
        curves[name] = [(r["train/value_loss"], r["train/approx_kl"], r["train/grad_scale_actor"],
                         float(r["train/lr_policy"]) / float(r["train/lr_value"]))
                        for r in csv.DictReader(open(tmp_path / name / "metrics.csv"))]
    assert curves["dapo-joint"] == curves["grpo"]
    assert curves["dapo"] != curves["grpo"]
    assert min(r[3] for r in curves["grpo"]) < 1  # the brake acted


def _floor(log_std_min=-1.0, **shape):
    """A noise floor with every option given (the extension's defaults unless in ``shape``): given options update
    those of the dapo-mujoco recipe's floor, so a test of one floor shape names all of them."""
    return {"noise_floor": {**dataclasses.asdict(NoiseFloorOptions()), "log_std_min": log_std_min, **shape}}


def _log_std_trace(run_dir, small_config, metric, updates=5, **overrides) -> tuple[list[float], list]:
    """Pendulum updates from log-std -1 on the dapo-mujoco recipe: the log-std after each and the named metric of
    each (the recipe's noise floor off unless the test gives one)."""
    overrides.setdefault("extensions", {"noise_floor": None})
    overrides.setdefault("recipe", ("dapo-mujoco",))
    t = Trainer(small_config(run_dir, env="Pendulum-v1", num_envs=1, num_steps=256, num_epochs=4, lr=1e-2,
                             log_std_init=-1.0, **overrides), run_dir)
    log_stds, metrics = [], []
    for _ in range(updates):
        metrics.append(t.iterate().get(metric))
        log_stds.append(t.actor.log_std.item())
    return log_stds, metrics


@pytest.mark.parametrize("numpy_update", [True, False])
def test_noise_floor_projects_the_noise_back_onto_its_floor(tmp_path, small_config, numpy_update):
    """The noise_floor extension: the run is unchanged until an update takes the log-std below the floor; from then
    on the parameter sits on the floor after every update (the same run without a floor goes below it)."""
    free, lifted_free = _log_std_trace(tmp_path / "free", small_config, "train/log_std_floored",
                                       numpy_update=numpy_update)
    floored, lifted = _log_std_trace(tmp_path / "floored", small_config, "train/log_std_floored",
                                     numpy_update=numpy_update, extensions=_floor(-1.0))
    crossed = next(i for i, v in enumerate(free) if v < -1.0)  # StopIteration here: the test lost its power
    assert floored[:crossed] == free[:crossed]
    assert all(v == -1.0 for v in floored[crossed:])
    assert lifted_free == [None] * 5  # no floor, no metric
    assert lifted[:crossed + 1] == [0.0] * crossed + [1.0]  # the update that crossed was lifted back
    with pytest.raises(ConfigError, match="above the initial log-std"):  # a floor above the start would move it
        Trainer(small_config(tmp_path, env="Pendulum-v1", log_std_init=-1.0, extensions=_floor(-0.5)), tmp_path)
    with pytest.raises(ConfigError, match="Discrete actions; remove it"):
        Trainer(small_config(tmp_path, extensions=_floor(-1.0)), tmp_path)


def test_annealed_log_std_floor_by_hand():
    """The floor's std e^-1.2 falls linearly to zero: half of it at mid-training, no floor at the end."""
    assert floor_at(-1.2, 0.0, anneal=True) == -1.2
    assert math.exp(floor_at(-1.2, 0.5, anneal=True)) == pytest.approx(math.exp(-1.2) / 2)
    assert math.exp(floor_at(-1.2, 0.75, anneal=True)) == pytest.approx(math.exp(-1.2) / 4)
    assert floor_at(-1.2, 1.0, anneal=True) == -math.inf
    assert floor_at(-1.2, 0.75, anneal=False) == -1.2
    held = [math.exp(floor_at(-1.2, p, anneal=True, start=0.5)) / math.exp(-1.2)
            for p in (0.0, 0.5, 0.75, 0.9)]  # held for the first half, then linear to zero
    assert held == pytest.approx([1.0, 1.0, 0.5, 0.2])
    for start in (0.0, 0.3, 0.5):  # the floats the committed runs were made with, bit for bit
        old = [min(schedules.linear(1.0 / (1.0 - start), 0.0, k / 488), 1.0) for k in range(489)]
        assert [floor_at(0.0, k / 488, True, start) for k in range(488)] == [math.log(r) for r in old[:488]]


def test_annealed_noise_floor_lowers_the_floor_the_policy_sits_on(tmp_path, small_config):
    """anneal=true: a log-std pushed far below the floor before each update comes back onto the floor of that
    update's progress: e^-1 x (1 - k/6) after update k of 6, below where a fixed floor would hold it."""
    total = 6 * 256
    cfg = small_config(tmp_path, env="Pendulum-v1", num_envs=1, num_steps=256, total_steps=total,
                       log_std_init=-1.0, extensions=_floor(-1.0, anneal=True))
    t = Trainer(cfg, tmp_path)
    for k in range(1, 6):
        with torch.no_grad():
            t.actor.log_std.fill_(-5.0)
        t.iterate()
        assert t.global_step == k * 256
        assert t.actor.log_std.item() == pytest.approx(-1.0 + math.log(1 - k / 6))
    with pytest.raises(ConfigError, match="anneal_start must be in"):
        small_config(tmp_path, env="Pendulum-v1", extensions=_floor(-1.2, anneal_start=0.5))  # needs anneal
    with pytest.raises(ConfigError, match="unknown option 'anneal_end'"):  # removed: its ablation lost
        small_config(tmp_path, env="Pendulum-v1", extensions=_floor(-1.2, anneal=True, anneal_end=0.75))


def test_relative_noise_floor_scales_by_the_action_half_range(tmp_path, small_config):
    """relative=true: Pendulum's torques span +-2, so the floor's std e^-1 becomes 2 e^-1; on actions in +-1
    (MountainCarContinuous) the run is the absolute floor's, number for number."""
    def floored_run(env, relative):
        run_dir = tmp_path / f"{env}-{relative}"
        t = Trainer(small_config(run_dir, env=env, num_envs=1, num_steps=256, log_std_init=0.0,
                                 extensions=_floor(-1.0, relative=relative)), run_dir)
        log_stds, metrics = [], []
        for _ in range(3):
            with torch.no_grad():
                t.actor.log_std.fill_(-5.0)  # far below any floor, so the projection decides where it ends
            metrics.append({k: v for k, v in t.iterate().items() if not k.startswith("time/")})
            log_stds.append(t.actor.log_std.item())
        return log_stds, metrics

    log_stds, metrics = floored_run("Pendulum-v1", True)
    assert log_stds == pytest.approx([-1.0 + math.log(2.0)] * 3)
    assert [m["train/log_std_floored"] for m in metrics] == [1.0] * 3  # every update's projection lifted it
    assert floored_run("Pendulum-v1", False)[0] == [-1.0] * 3
    assert floored_run("MountainCarContinuous-v0", True) == floored_run("MountainCarContinuous-v0", False)


def test_checkpoint_from_before_the_health_controller_resumes(tmp_path, small_config):
    """A checkpoint whose "health" entry has the old single-agent layout (one monitor pair, float scales, best actor
    and its statistics beside them) loads into the controller: scales, counts, events, monitors and the snapshot."""
    t = Trainer(small_config(tmp_path, collapse_window=2), tmp_path)
    t.iterate()
    s = t.state_dict()
    best = {k: v + 1.0 for k, v in t.actor.state_dict().items()}
    collapse = {"recent": [1.0, 2.0], "first_mean": 1.5, "best_mean": 1.5, "best_std": 0.5}  # no seen_drops/fresh
    s["health"] = {"collapse": collapse, "divergence": {"history": [3.0]}, "scales": (1.5, 1.2, 0.5),
                   "counts": {"policy_collapse": 1, "value_divergence": 1, "non_finite": 0},
                   "events": [{"step": 256, "event": "policy_collapse", "detail": "recent mean far below best 9.0"}],
                   "best_actor": best, "last_good": t.guard.last_good}  # no best_obs_norm: before the refit rule
    resumed = Trainer(t.cfg, tmp_path, s)
    low, high, eps_v = resumed.clip_ranges()
    progress = resumed.global_step / t.cfg.total_steps
    assert (low, high) == (0.2 * 1.5, 0.2 * 1.5)
    assert eps_v == (0.5 + (0.3 - 0.5) * progress) * 1.2
    assert resumed.health.critic_lr_scale == 0.5 and resumed.health_counts["policy_collapse"] == 1
    assert resumed.health_events == s["health"]["events"]
    assert resumed.health.collapse[0].best_mean == 1.5 and list(resumed.health.divergence[0].history) == [3.0]
    resumed._restore_actor(resumed.health.best[0])  # no statistics saved: loaded as it is
    assert all(torch.equal(best[k], v) for k, v in resumed.actor.state_dict().items())
    again = Trainer(t.cfg, tmp_path, resumed.state_dict())  # and the new layout round-trips
    assert again.clip_ranges() == resumed.clip_ranges() and again.health.critic_lr_scale == 0.5
