"""Offline training of DT, DAPO-DT and the BC baselines on a dataset, evaluation, and checkpoint state
(docs/algorithms.md section 6).

DT (Chen et al. 2021): cross-entropy of the dataset's Discrete actions (squared error of its Box actions, scaled to
[-1, 1], through a tanh head) given (R, s, a) contexts.  ``bc``: the same without return tokens; ``pct-bc``: ``bc``
on the best ``--top-fraction`` of the episodes by return.
DAPO-DT adds, on the same batches:

- a value head ``V(s_t)`` regressed on the scaled hindsight return ``G_t``, on stop-gradient features of the
  imitation CNN or (``--separate-value-encoder``) on its own CNN;
- advantages ``A_t = G_t - V(s_t)`` (``V`` detached), normalised over the batch's real tokens, with ``G_t``
  the return-to-go or, with ``--adv-gamma`` below 1, the discounted return;
- per-token weights ``clip(exp(A_t / T), max)`` on the action loss (core.algo.losses), so actions that did
  better than expected are imitated more and worse ones less (never ``|A|``, docs/algorithms.md); optionally
  ``exp(trust * A_t / T)`` with ``trust = clip(EV, 0, 1)`` the value head's explained variance, so that
  an untrained critic's noise does not reweight the imitation (``--ev-gated-weights``);
- the advantage FiLM after every attention sub-layer, fed ``A_t`` in training and a constant target
  advantage when acting.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from core.training.checkpoint import save_checkpoint
from core.config.errors import ConfigError
from core.run.evaluation import sample_std
from core.training.loop import rng_state, seed_everything, set_rng_state, train_loop
from core.algo.advantages import explained_variance
from dapo_dt.losses import action_loss, exponential_advantage_weights, masked_normalise
from core.training.trainer import pick_device
from dapo_dt.acting import Episode, play
from dapo_dt.config import ACTIVATIONS, BC_ALGOS, DTConfig
from dapo_dt.data import DTBatch, Trajectories, normalised_score, return_scale
from dapo_dt.model import DecisionTransformer, DTModelConfig
from dapo_dt.online import online_iteration


def token_weights(adv: Tensor, mask: Tensor, temperature: float, max_weight: float) -> Tensor:
    """Per-token action-loss weights ``(B, K)`` from advantages ``adv`` ``(B, K)``: ``exp(A / T)`` capped at
    ``max_weight`` (:func:`dapo_dt.losses.exponential_advantage_weights`), rescaled to mean 1 over the real
    (``mask``) tokens, then capped at ``max_weight`` again.

    The rescaling lets the weights reshape the loss across tokens without also raising the effective learning
    rate (``E[exp(z)] = e^0.5`` for ``z ~ N(0, 1)``).  It divides by the batch mean, which is below 1 when the
    first cap binds on a skewed batch, and a weight could then exceed ``--adv-max-weight`` (issue 46); the second
    cap keeps every weight within it, as documented.  It binds only in such batches (a mean of at least 1 leaves
    every rescaled weight at or below the cap), so the mean stays 1 elsewhere."""
    w = exponential_advantage_weights(adv, temperature, max_weight)
    return (w / w[mask].mean()).clamp(max=max_weight)


def critic_trust(v: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """``clip(EV, 0, 1)`` of predictions ``v`` against ``target`` over the real tokens, all ``(B, K)``.

    0 when the critic explains nothing (or the targets are constant), 1 when it explains them fully: the
    same trust-the-critic-by-its-EV rule as GRPO's GAE lambda (docs/algorithms.md), here scaling advantages."""
    ev = explained_variance(v.detach()[mask], target[mask])
    return torch.nan_to_num(ev, nan=0.0).clamp(0.0, 1.0)


class DTTrainer:
    def __init__(self, cfg: DTConfig, run_dir: Path, checkpoint: Optional[dict] = None, load_data: bool = True):
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.device = pick_device(cfg.device)
        torch.set_num_threads(cfg.torch_threads)
        seed_everything(cfg.seed)
        if checkpoint is not None and load_data is False:  # evaluation only: no dataset needed
            self.data, self.scale, self.target_return = None, checkpoint["scale"], checkpoint["target_return"]
            self.ref_scores = None  # set from the checkpoint below
            model_cfg = DTModelConfig(**checkpoint["model_config"])
        else:
            self.data = Trajectories.from_dataset(
                cfg.dataset, cfg.dataset_steps, value_gamma=cfg.adv_gamma, path=cfg.dataset_path,
                top_fraction=cfg.top_fraction if cfg.algo == "pct-bc" else None)
            check_data(cfg, self.data)
            self.scale = return_scale(self.data)
            self.ref_scores = self.data.ref_scores  # D4RL-style (random, expert) returns: normalised scores
            self.target_return = (cfg.target_return if cfg.target_return is not None
                                  else float(self.data.episode_returns.max()))
            # Timesteps beyond the longest dataset game reuse the last trained row (the model clamps):
            # rows never seen in training would add untrained noise to every token.
            d = self.data
            model_cfg = DTModelConfig(
                n_actions=d.n_actions, state_dim=0 if d.atari else int(d.frames.shape[1]), act_dim=d.act_dim,
                returns=cfg.algo not in BC_ALGOS,
                action_low=None if d.action_low is None else [float(x) for x in d.action_low],
                action_high=None if d.action_high is None else [float(x) for x in d.action_high],
                context_len=cfg.context_len, n_layer=cfg.n_layer, n_head=cfg.n_head,
                n_embd=cfg.n_embd, max_timestep=int(self.data.timesteps.max()) + 1, dropout=cfg.dropout,
                activation=ACTIVATIONS[cfg.activation],
                advantage_modulation=cfg.advantage_modulation, value_head=cfg.algo == "dapo-dt",
                value_encoder=cfg.separate_value_encoder, bf16=cfg.precision == "bf16")
        self.model = DecisionTransformer(model_cfg).to(self.device)
        if self.data is not None and not self.data.atari:  # the DT paper's state normalisation, saved with the model
            mean, std = self.data.state_stats()
            self.model.state_mean.copy_(torch.as_tensor(mean))
            self.model.state_std.copy_(torch.as_tensor(std))
        value = {p for m in (self.model.value_head, self.model.value_cnn) if m is not None for p in m.parameters()}
        self.value_params = [p for p in self.model.parameters() if p in value]
        self.imitation_params = [p for p in self.model.parameters() if p not in value]
        decay = [p for p in self.model.parameters() if p.requires_grad and p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.requires_grad and p.dim() < 2]
        self.optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                            {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
        self.rng = np.random.default_rng(cfg.seed)
        self.grad_step, self.env_steps, self.elapsed = 0, 0, 0.0
        self.last_eval: list[float] = []  # scores of the latest evaluation
        self.clip = cfg.clip_init  # the online clip range (dapo-dt), adapted from the KL
        if checkpoint is not None:
            self.load_state_dict(checkpoint)

    # --- offline -------------------------------------------------------------------------------
    def lr_at(self, step: int) -> float:
        """Linear warm-up, then cosine decay to 10% of ``lr`` at ``grad_steps``."""
        c = self.cfg
        if step < c.warmup_steps:
            return c.lr * (step + 1) / c.warmup_steps
        progress = min(1.0, (step - c.warmup_steps) / max(1, c.grad_steps - c.warmup_steps))
        return c.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    def offline_loss(self, b: DTBatch) -> tuple[Tensor, dict[str, float]]:
        """DT cross-entropy, plus for DAPO-DT the value loss, advantage weights and FiLM input."""
        c, rtg = self.cfg, b.rtg / self.scale                                # (B, K) scaled return-to-go
        adv, weights, metrics = None, None, {}
        if self.model.value_head is not None:
            values = self.model.encode_states(b.frames)                      # (B, K, d) reused below
            v = self.state_values(b.frames, values)                          # (B, K)
            g = b.returns / self.scale                                       # (B, K) G_t, discounted by adv_gamma
            v_loss = ((v - g) ** 2)[b.mask].mean()
            adv = masked_normalise(g - v.detach(), b.mask)                   # (B, K)
            trust = critic_trust(v, g, b.mask)
            if c.advantage_weighting:
                strength = trust if c.ev_gated_weights else 1.0
                weights = token_weights(strength * adv, b.mask, c.adv_temperature, c.adv_max_weight)
            out = self.model(rtg, None, b.actions, b.timesteps, b.mask,
                             adv if c.advantage_modulation else None, state_feat=values)
            metrics.update({"train/value_loss": float(v_loss.detach()), "train/critic_trust": float(trust)})
        else:
            out = self.model(rtg, b.frames, b.actions, b.timesteps, b.mask)
            v_loss = torch.zeros(())
        a_loss, diag = action_loss(out.logits, b.actions, weights, b.mask)  # cross-entropy, or MSE for Box actions
        metrics.update({"train/action_loss": float(a_loss.detach()), **{f"train/{k}": float(v) for k, v in diag.items()}})
        return a_loss + c.value_coef * v_loss, metrics

    def state_values(self, frames: Tensor, state_feat: Tensor) -> Tensor:
        """``V(s_t)`` ``(B, K)`` from the imitation CNN's features ``(B, K, d)`` (or V's own CNN); the value
        loss reaches the imitation CNN only with ``value_trains_encoder`` (offline and online alike)."""
        v_in = state_feat if self.cfg.value_trains_encoder else state_feat.detach()
        return self.model.state_values(frames, v_in)

    def train_step(self) -> dict[str, float]:
        c = self.cfg
        self.model.train()
        lr = self.lr_at(self.grad_step)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        batch = self.data.sample(c.batch_size, c.context_len, self.rng, self.device)
        loss, metrics = self.offline_loss(batch)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite loss at gradient step {self.grad_step}")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        metrics.update(self.clip_gradients())
        self.optimizer.step()
        self.grad_step += 1
        return {**metrics, "train/loss": float(loss.detach()), "train/lr": lr}

    def clip_gradients(self) -> dict[str, float]:
        """Clip the value head's gradient norm apart from the rest: early on Pong its regression gradients
        are several times the imitation gradients' norm, and a common clip factor would shrink the imitation
        step by whatever the value loss happens to be."""
        c, out = self.cfg, {}
        out["train/grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.imitation_params, c.max_grad_norm))
        if self.value_params:
            out["train/value_grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.value_params, c.max_grad_norm))
        return out

    # --- acting --------------------------------------------------------------------------------
    def play(self, episodes: int, seed: int, record: bool = False) -> list[Episode]:
        c = self.cfg
        target_adv = c.target_advantage if c.advantage_modulation else None
        return play(self.model, c.env, episodes, min(c.online_envs, episodes) if not record else c.online_envs,
                    self.target_return, self.scale, seed, self.device, target_adv, c.eval_max_steps, record)

    def evaluate(self) -> list[float]:
        """Whole-game scores of ``eval_episodes`` games (seeded by the gradient step: comparable across runs)."""
        return [ep.score for ep in self.play(self.cfg.eval_episodes, 10_000 + self.cfg.seed + self.grad_step)]

    # --- state ---------------------------------------------------------------------------------
    def save(self) -> None:
        save_checkpoint(self.run_dir / "checkpoint.pt", self.state_dict())

    def state_dict(self) -> dict:
        return {"grad_step": self.grad_step, "env_steps": self.env_steps, "elapsed": self.elapsed,
                "model_config": dataclasses.asdict(self.model.cfg), "scale": self.scale,
                "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "clip": self.clip,
                "batch_rng": self.rng.bit_generator.state, "rng": rng_state(), "target_return": self.target_return,
                "ref_scores": None if self.ref_scores is None else list(self.ref_scores)}

    def load_state_dict(self, s: dict) -> None:
        self.grad_step, self.env_steps, self.elapsed = s["grad_step"], s["env_steps"], s["elapsed"]
        self.model.load_state_dict(s["model"])
        self.optimizer.load_state_dict(s["optimizer"])
        self.clip, self.scale, self.target_return = s["clip"], s["scale"], s["target_return"]
        self.rng.bit_generator.state = s["batch_rng"]
        set_rng_state(s["rng"])
        ref = s.get("ref_scores")  # absent in checkpoints from before reference scores
        self.ref_scores = self.ref_scores if ref is None else (float(ref[0]), float(ref[1]))

    # --- the loop (core.training.loop.train_loop drives it) -------------------------------------------------
    stop_requested = False
    batch_size = 1  # time/sps and the progress bar count loop iterations (gradient steps offline)

    @property
    def global_step(self) -> int:
        """The x-axis of metrics.csv: gradient steps."""
        return self.grad_step

    def train(self, logger, progress=None, max_iterations: Optional[int] = None) -> None:
        """Offline gradient steps (evaluating every ``eval_every``), then online fine-tuning until
        ``online_steps`` env steps; checkpoints periodically and on the way out (also on Ctrl-C)."""
        train_loop(self, logger, progress, max_iterations)

    def finished(self) -> bool:
        c = self.cfg
        return self.stop_requested or (self.grad_step >= c.grad_steps and self.env_steps >= c.online_steps)

    def iterate(self) -> dict[str, float]:
        """One offline gradient step, or (offline budget spent) one online round of play and updates."""
        c = self.cfg
        if self.grad_step < c.grad_steps:
            metrics = self.train_step()
            evaluate = self.grad_step % c.eval_every == 0 or self.grad_step == c.grad_steps
        else:
            metrics = online_iteration(self)
            self.grad_step += int(metrics["online/updates"])
            evaluate = self.env_steps >= c.online_steps
        if evaluate:
            metrics.update(self.eval_metrics())
        metrics["online/env_steps"] = self.env_steps
        return metrics

    def recent_return(self) -> float:
        """The latest evaluation's mean score (NaN before the first)."""
        return float(np.mean(self.last_eval)) if self.last_eval else math.nan

    def eval_metrics(self) -> dict[str, float]:
        scores = self.evaluate()
        self.last_eval = scores
        return {"eval/return_mean": float(np.mean(scores)), "eval/return_std": sample_std(scores),
                "eval/human_normalised": human_normalised(self.cfg.env, float(np.mean(scores))),
                "eval/normalised_score": normalised_score(float(np.mean(scores)), self.ref_scores)}


def check_data(cfg: DTConfig, data: Trajectories) -> None:
    """The loaded data against the run's options, one line each: the env (an Atari dataset's recorded game; frames
    need an Atari env and flat states a non-Atari one), online fine-tuning (Discrete actions only: a Box-action DT
    is deterministic, without the log-probabilities the online objective needs) and the context length (at least
    one episode must fill it)."""
    from core.envs.make import is_atari
    from dapo_dt.data import dataset_label

    label = dataset_label(cfg.dataset, cfg.dataset_path)
    if data.atari and data.env_id is not None and data.env_id != cfg.env:
        raise ConfigError(f"dataset {label} was collected on {data.env_id}, not {cfg.env}; pass --env {data.env_id}")
    if data.atari != is_atari(cfg.env):
        what = "84x84 Atari frames" if data.atari else "flat states"
        raise ConfigError(f"dataset {label} holds {what} but --env {cfg.env} is {'not ' if data.atari else ''}an Atari "
                          "game; evaluation must play an env with the dataset's observations")
    if cfg.online_steps and data.act_dim:
        raise ConfigError(f"dataset {label} has Box actions: the DT predicts them deterministically (tanh head, MSE), "
                          "without the log-probabilities online fine-tuning needs; drop --online-steps")
    longest = int(data.episode_lengths.max())
    if longest < cfg.context_len:
        raise ConfigError(f"dataset {label}: every episode is shorter than the context (longest {longest} steps, "
                          f"--context-len {cfg.context_len}); use --context-len {longest} or less")


# Random and human reference scores from Mnih et al. (2015), Nature 518, Extended Data Table 2.
ATARI_REFERENCE = {"Pong": (-20.7, 9.3), "Breakout": (1.7, 31.8)}


def human_normalised(env_id: str, score: float) -> float:
    """``(score - random) / (human - random)``; NaN for games without reference scores here."""
    game = env_id.removeprefix("ALE/").split("-")[0]
    if game not in ATARI_REFERENCE:
        return float("nan")
    random, human = ATARI_REFERENCE[game]
    return (score - random) / (human - random)
