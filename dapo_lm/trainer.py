"""The LM trainer: a supervised warm start on worked answers, then critic-free RL against the verifier
(GRPO / DAPO, docs/algorithms.md, section 8), driven by core.training.loop.train_loop.

``global_step`` counts generated RL answers (filtered ones included), so every algorithm of the ablation ladder
spends the same budget; the warm start runs first, in chunks of iterations logged at step 0.  What it trains on (the
tokenizer, the prompt source, the reward, the model) comes from :func:`dapo_lm.setup.prepare`.
"""
from __future__ import annotations

import copy
import math
import time
import warnings
from collections import deque
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from core.training.checkpoint import save_checkpoint
from core.config.errors import ConfigError
from dapo_lm.group_filter import GroupFilter
from dapo_lm.lora import trainable
from dapo_lm.losses import (aggregate, batch_normaliser, clipped_token_surrogate, constant_groups, group_advantages,
                            response_mask)
from core.training.loop import rng_state, seed_everything, set_rng_state, train_loop
from core.training.trainer import pick_device
from dapo_lm.config import LMConfig
from dapo_lm.data_parallel import group_generators, make_shards
from dapo_lm.health import LM_EVENTS, LMHealth
from dapo_lm.model import answer_logprobs, answer_tokens, autocast, supervised_loss
from dapo_lm.rewards import RewardError
from dapo_lm.rollout import collate, generate_groups, heldout_accuracy
from dapo_lm.setup import PROMPT_ROOM, Setup, n_positions, prepare  # noqa: F401 - n_positions, PROMPT_ROOM: API

WARM_CHUNK = 10  # supervised steps per iteration of the warm start (one metrics row, one progress update, ~10 s on 2 cores)


class LMTrainer:
    def __init__(self, cfg: LMConfig, run_dir: Path, checkpoint: Optional[dict] = None, setup: Optional[Setup] = None):
        self.cfg, self.run_dir = cfg, Path(run_dir)
        # data-parallel ranks under torchrun (dapo_lm/data_parallel.py); with one process all of it is the identity
        self.device, self.shards = make_shards(pick_device(cfg.device))
        self.group_streams = self.shards.enabled if cfg.group_streams is None else cfg.group_streams
        torch.set_num_threads(cfg.torch_threads)
        seed_everything(cfg.seed)
        setup = setup or prepare(cfg, dry_run=False)  # the runner prepares (and checks) it before the run directory
        self.tok, self.task, self.source, self.reward = setup.tok, setup.task, setup.source, setup.reward
        self.model = setup.model.to(self.device)
        self.trainable = trainable(self.model)  # every parameter, or the LoRA adapters alone (dapo_lm/lora.py)
        self.shards.dist.broadcast_modules([self.model])
        self.rng = np.random.default_rng(cfg.seed)
        self.gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.filter = GroupFilter(cfg.prompts_per_batch, cfg.max_gen_rounds, enabled=bool(cfg.dynamic_sampling),
                                  criterion=cfg.group_filter, carry=cfg.carry_surplus)
        self.health = LMHealth(cfg)
        self.heldout = self.source.heldout_set(cfg.eval_problems)
        self.global_step, self.warm_step, self.iteration, self.elapsed = 0, 0, 0, 0.0
        self.tokens_generated, self.optimizer_steps = 0, 0  # RL answers' tokens (EOS included); RL AdamW steps
        self.rl_seconds = 0.0  # time in RL iterations less their held-out evaluations (the throughput's clock)
        self.warm_start_eval: dict = {}
        self.evals: list[dict] = []  # every held-out evaluation: step, elapsed, accuracies
        self.recent: deque[float] = deque(maxlen=10)
        self.health_counts = {name: 0 for name in LM_EVENTS}
        self.health_events: list[dict] = []
        self.stop_requested = False
        self.failure: Optional[RewardError] = None  # a reward that failed in an evaluation: the run stops after it
        self._before: Optional[dict] = None  # the state before this iteration, while the model is unchanged
        self.optimizer = self._optimizer()
        if checkpoint is not None:
            self.load_state_dict(checkpoint)

    # --- the loop's interface (core.training.loop) -------------------------------------------------------------
    @property
    def warm_done(self) -> bool:
        return self.warm_step >= self.cfg.warm_start_steps and bool(self.warm_start_eval)

    @property
    def batch_size(self) -> int:
        return self.cfg.prompts_per_batch * self.cfg.group_size

    def finished(self) -> bool:
        """A Ctrl-C on any data-parallel rank stops every rank at the same iteration."""
        self.stop_requested = self.shards.any_true(self.stop_requested)
        return (self.stop_requested or self.failure is not None
                or (self.warm_done and self.global_step >= self.cfg.total_steps))

    def recent_return(self) -> float:
        return float(np.mean(self.recent)) if self.recent else math.nan

    def train(self, logger, progress=None, max_iterations: Optional[int] = None) -> None:
        """The loop; a reward that raises (or returns bad values) stops the run with a checkpoint and its error in one
        line.  While generating, nothing but the random streams and the prompt and surplus bookkeeping has moved:
        those are put back, so the checkpoint is the state before the failing iteration and a resume redoes it.  In
        an evaluation, the iteration ends without it and is checkpointed."""
        try:
            train_loop(self, logger, progress, max_iterations)
        except RewardError as e:
            if self._before is None:
                raise
            self._restore(self._before)
            self.save()
            self.failure = e
        if self.failure is not None:
            raise RewardError(f"{self.failure}; the run stopped at {self.global_step} answers with a checkpoint: fix "
                              f"the reward, then dapo run --resume {self.run_dir} --trust-env") from self.failure

    def _snapshot(self) -> dict:
        return {"iteration": self.iteration, "rng": rng_state(), "generator": self.gen.get_state().clone(),
                "np_rng": copy.deepcopy(self.rng.bit_generator.state), "prompts": self.source.state_dict(),
                "filter": copy.copy(self.filter.state_dict())}

    def _restore(self, s: dict) -> None:
        self.iteration = s["iteration"]
        set_rng_state(s["rng"])
        self.gen.set_state(s["generator"])
        self.rng.bit_generator.state = s["np_rng"]
        self.source.load_state_dict(s["prompts"])
        self.filter.load_state_dict(s["filter"])

    def _evaluate_or_stop(self) -> Optional[dict]:
        """:meth:`evaluate` (on rank 0, its result shared), or None when the reward fails in it (the run then stops
        after this iteration, on every rank)."""
        def run():
            try:
                return self.evaluate(), None
            except RewardError as e:
                return None, e

        result, error = self.shards.from_main(run)
        if error is not None:
            self.failure = error
        return result

    def progress_note(self) -> str:
        """The warm start's progress, which the answer count (``global_step``) does not show."""
        return "" if self.warm_done else f"warm start {self.warm_step}/{self.cfg.warm_start_steps} supervised steps"

    def iterate(self) -> dict:
        self._before = self._snapshot()
        self.iteration += 1
        return self.rl_iterate() if self.warm_done else self.warm_iterate()

    def _optimizer(self) -> torch.optim.Optimizer:
        lr = self.cfg.lr if self.warm_step >= self.cfg.warm_start_steps else self.cfg.warm_start_lr
        return torch.optim.AdamW(self.trainable, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)

    # --- warm start ------------------------------------------------------------------------------------
    def warm_iterate(self) -> dict:
        c, t0, losses = self.cfg, time.perf_counter(), []
        self.model.train()
        if self.warm_step < c.warm_start_steps:
            self._before = None  # the model moves
        for _ in range(min(WARM_CHUNK, c.warm_start_steps - self.warm_step)):
            warmup = max(1, c.warm_start_steps // 10)
            for group in self.optimizer.param_groups:
                group["lr"] = c.warm_start_lr * min(1.0, (self.warm_step + 1) / warmup)
            problems = self.source.draw(self.rng, c.warm_start_batch)  # the whole batch, on every rank alike
            prompts = [self.tok.encode_prompt(p.prompt) for p in problems]
            seqs = [p + self.tok.encode_answer(q.answer) for p, q in zip(prompts, problems)]
            width = max(map(len, seqs))
            ids = torch.full((len(seqs), width), self.tok.pad_id, dtype=torch.long)
            mask, answer = torch.zeros_like(ids), torch.zeros_like(ids)
            for i, (s, p) in enumerate(zip(seqs, prompts)):
                ids[i, :len(s)], mask[i, :len(s)], answer[i, len(p):len(s)] = torch.tensor(s), 1, 1
            # this rank's rows; under torchrun their loss is its share of the whole batch's mean, the gradients summed
            rows, norm = self.shards.part(len(seqs)), answer_tokens(answer) if self.shards.enabled else None
            self.optimizer.zero_grad(set_to_none=True)
            loss = torch.zeros(())
            if rows.stop > rows.start:
                with autocast(self.device):
                    loss = supervised_loss(self.model, ids[rows].to(self.device), mask[rows].to(self.device),
                                           answer[rows].to(self.device), norm)
                loss.backward()
            self.shards.sum_gradients(self.trainable)
            torch.nn.utils.clip_grad_norm_(self.trainable, c.max_grad_norm)
            self.optimizer.step()
            self.warm_step += 1
            losses.append(float(loss.detach()))
        losses = [v for _, v in sorted(self.shards.sum(dict(enumerate(losses))).items())]  # the ranks' shares added
        metrics = {"warm/loss": float(np.mean(losses)) if losses else math.nan, "warm/step": self.warm_step}
        if self.warm_step >= c.warm_start_steps and (result := self._evaluate_or_stop()) is not None:
            self.warm_start_eval = result
            self.evals.append({"step": 0, "elapsed": self.elapsed, **self.warm_start_eval})
            metrics.update({f"eval/{k}": v for k, v in self.warm_start_eval.items()})
            self.optimizer = self._optimizer()  # RL starts with fresh moments at its own rate
        metrics["time/sps"] = len(losses) * c.warm_start_batch / max(time.perf_counter() - t0, 1e-9)
        return metrics

    # --- RL ---------------------------------------------------------------------------------------------
    def _round(self):
        """One generation round: the prompts drawn on every rank alike, this rank's share answered, every rank's
        groups gathered (in the one-process order).  With ``--group-streams`` each group samples from a
        stream keyed by its index in the run (the groups generated before it: ``global_step / G`` of earlier
        iterations and this iteration's earlier rounds), so the round does not depend on the number of ranks."""
        c = self.cfg
        problems = self.source.draw(self.rng, c.prompts_per_batch)
        mine = self.shards.part(len(problems))
        first = self.global_step // c.group_size + len(self._generated) + mine.start
        gen = group_generators(c.seed, first, mine.stop - mine.start, self.device) if self.group_streams else self.gen
        groups = self.shards.gather_groups(lambda: generate_groups(self.model, self.tok, self.reward, problems[mine],
                                                                   c, self.device, gen)[0])
        self._generated.extend(groups)
        return groups, torch.stack([grp["rewards"] for grp in groups]), torch.stack([grp["correct"] for grp in groups])

    def rl_iterate(self) -> dict:
        c, t0 = self.cfg, time.perf_counter()
        self._generated: list[dict] = []
        fill = self.filter.fill(self._round)
        gen_s = time.perf_counter() - t0
        made = self._generated
        self.global_step += len(made) * c.group_size
        correct = torch.cat([g["correct"] for g in made]).float()
        lengths = torch.cat([g["lengths"] for g in made]).float()
        zero_var = float(constant_groups(torch.stack([g["rewards"] for g in made])).float().mean())
        self.recent.append(float(correct.mean()))
        metrics = {"rollout/accuracy": float(correct.mean()),
                   "rollout/reward_mean": float(torch.cat([g["rewards"] for g in made]).mean()),
                   "rollout/length_mean": float(lengths.mean()), "rollout/length_max": float(lengths.max()),
                   "rollout/truncated_share": float(torch.cat([g["truncated"] for g in made]).float().mean()),
                   "rollout/zero_variance_share": zero_var, "sampler/rounds": fill.rounds,
                   "sampler/groups": len(fill.groups), "sampler/filtered_share": fill.filtered / max(fill.generated, 1),
                   "sampler/from_surplus": fill.from_surplus, "sampler/surplus": len(self.filter.pending),
                   "sampler/hit_cap": int(fill.hit_cap)}
        t1 = time.perf_counter()
        self._before = None  # the update moves the model
        if fill.groups:
            metrics.update(self.update(fill.groups))
        upd_s = time.perf_counter() - t1
        stats = (metrics.get("train/entropy", math.nan), metrics["rollout/length_mean"], zero_var,
                 metrics.get("train/clip_low", 0.0), metrics.get("train/clip_high", 0.0))
        for name in self.health.check(*stats):
            self.health_counts[name] += 1
            self.health_events.append({"step": self.global_step, "event": name,
                                       "detail": self.health.detail(name, *stats)})
        metrics.update({f"health/{k}": v for k, v in self.health_counts.items()})
        eval_s = 0.0
        before = self.global_step - len(made) * c.group_size
        if c.eval_every and self.global_step // c.eval_every > before // c.eval_every:
            t2 = time.perf_counter()
            result = self._evaluate_or_stop()
            eval_s = time.perf_counter() - t2
            if result is not None:
                self.evals.append({"step": self.global_step, "elapsed": self.elapsed + time.perf_counter() - t0,
                                   **result})
                metrics.update({f"eval/{k}": v for k, v in result.items()})
        dt = time.perf_counter() - t0
        tokens = float(lengths.sum())
        self.tokens_generated += int(tokens)
        self.rl_seconds += dt - eval_s
        metrics.update({"time/sps": len(made) * c.group_size / dt, "time/tokens_per_s": tokens / dt,
                        "time/generate_s": gen_s, "time/update_s": upd_s,
                        "time/generate_tokens_per_s": tokens / max(gen_s, 1e-9),
                        "time/elapsed_s": self.elapsed + dt})
        return metrics

    def update(self, groups: list[dict]) -> dict:
        """One RL update on a batch of groups: advantages, the old log-probs, then minibatch steps.

        pi_old is what the sampler drew each token with: at ``--temperature`` (log softmax(logits / T)) and in eval
        mode, without dropout (a --model-dir GPT-2 has dropout 0.1; a fresh one has none); keeping it from the
        sampler saves the scoring pass TRL and verl run (their samplers are other engines), and makes the ratio the
        importance weight against the distribution the tokens truly came from.  pi_theta is scored the same way
        (temperature, no dropout, as verl and TRL effectively do), so the ratio is 1 at identical weights up to the
        float rounding between the cached and the full forward pass (~1e-7 in fp32) and moves only with the
        weights; the warm start keeps the model's dropout.  Under torchrun every rank holds the whole batch; each
        takes a contiguous part of every minibatch, divides its loss by the whole minibatch's normaliser, and the
        gradients are summed (dapo_lm/data_parallel.py)."""
        c, dev = self.cfg, self.device
        b = collate(groups, self.tok.pad_id).to(dev)
        adv = group_advantages(b.rewards, c.std_normalise).reshape(-1)                       # (N,)
        width = b.tokens.shape[1]
        real = response_mask(b.lengths, width, b.truncated, False)                            # (N, R)
        counted = response_mask(b.lengths, width, b.truncated, bool(c.filter_truncated))      # (N, R)
        logp_old = b.logp_old  # (N, R): each group's behaviour policy, kept since it was sampled
        self.model.eval()  # no dropout in pi_theta either: the ratio is exactly 1 at identical weights
        n = len(adv)
        sums = dict(loss=0.0, entropy=0.0, tokens=0.0, counted=0.0, low=0.0, high=0.0, kl=0.0, grad=0.0, steps=0)
        for _ in range(c.num_epochs):
            for mb in self.shards.permutation(n).chunk(min(c.num_minibatches, n)):
                mb = mb.to(dev)
                norm = batch_normaliser(counted[mb], c.loss_aggregation, c.max_new_tokens)  # the whole minibatch's
                self.optimizer.zero_grad(set_to_none=True)
                mine = mb[self.shards.part(len(mb))]  # all of it in one process
                micros = mine.split(len(mine) if c.micro_batch_size is None else c.micro_batch_size) if len(mine) else ()
                for micro in micros:
                    with autocast(dev):
                        logp, ent = answer_logprobs(self.model, b.prompt_ids[micro], b.prompt_mask[micro],
                                                    b.tokens[micro], real[micro], with_entropy=True,
                                                    temperature=c.temperature)
                    tok_loss, d = clipped_token_surrogate(logp, logp_old[micro], adv[micro], c.clip_eps_low,
                                                          c.clip_eps_high)
                    loss = aggregate(tok_loss, counted[micro], c.loss_aggregation, norm)
                    loss.backward()
                    m, r = counted[micro], real[micro]
                    log_ratio = (logp - logp_old[micro]).detach()
                    sums["loss"] += float(loss.detach())
                    sums["entropy"] += float(ent.detach()[r].sum())
                    sums["tokens"] += float(r.sum())
                    sums["counted"] += float(m.sum())
                    sums["low"] += float(d["clipped_low"][m].sum())
                    sums["high"] += float(d["clipped_high"][m].sum())
                    sums["kl"] += float(((log_ratio.exp() - 1) - log_ratio)[m].sum())
                self.shards.sum_gradients(self.trainable)
                sums["grad"] += float(torch.nn.utils.clip_grad_norm_(self.trainable, c.max_grad_norm))
                self.optimizer.step()
                sums["steps"] += 1
                self.optimizer_steps += 1
        sums.update(self.shards.sum({k: v for k, v in sums.items() if k not in ("grad", "steps")}))  # the ranks' parts
        steps, counted_tokens = max(sums["steps"], 1), max(sums["counted"], 1.0)
        return {"train/loss": sums["loss"] / steps, "train/entropy": sums["entropy"] / max(sums["tokens"], 1.0),
                "train/clip_low": sums["low"] / counted_tokens, "train/clip_high": sums["high"] / counted_tokens,
                "train/approx_kl": sums["kl"] / counted_tokens, "train/grad_norm": sums["grad"] / steps,
                "train/adv_abs_mean": float(adv.abs().mean()), "train/lr": c.lr}

    def evaluate(self) -> dict:
        c = self.cfg
        return heldout_accuracy(self.model, self.tok, self.reward, self.heldout, c.max_new_tokens, self.device,
                                c.eval_samples, c.seed + 10_000)

    # --- checkpoints ----------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"global_step": self.global_step, "warm_step": self.warm_step, "iteration": self.iteration,
                "tokens_generated": self.tokens_generated, "optimizer_steps": self.optimizer_steps,
                "rl_seconds": self.rl_seconds,
                "elapsed": self.elapsed, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "rng": rng_state(), "generator": self.gen.get_state(), "np_rng": self.rng.bit_generator.state,
                "filter": self.filter.state_dict(), "prompts": self.source.state_dict(),
                "health": self.health.state_dict(),
                "health_counts": dict(self.health_counts), "health_events": list(self.health_events),
                "warm_start_eval": dict(self.warm_start_eval), "evals": list(self.evals), "recent": list(self.recent)}

    def load_state_dict(self, s: dict) -> None:
        self.global_step, self.warm_step = int(s["global_step"]), int(s["warm_step"])
        self.iteration = int(s["iteration"])
        self.elapsed = float(s["elapsed"])
        self.tokens_generated, self.optimizer_steps = int(s["tokens_generated"]), int(s["optimizer_steps"])
        self.rl_seconds = float(s["rl_seconds"])
        try:
            self.model.load_state_dict(s["model"])
        except (RuntimeError, KeyError, TypeError) as e:
            raise ConfigError(f"checkpoint does not fit the run's model ({type(e).__name__})") from e
        self.warm_start_eval, self.evals = dict(s["warm_start_eval"]), list(s["evals"])
        self.optimizer = self._optimizer()
        self.optimizer.load_state_dict(s["optimizer"])
        set_rng_state(s["rng"])
        saved_gen = s["generator"]
        if saved_gen.numel() == self.gen.get_state().numel():
            self.gen.set_state(saved_gen.to(self.gen.get_state().device))
        else:  # saved on another device type (cuda <-> cpu): its sampling stream cannot move; a fresh, seeded one
            self.gen.manual_seed(self.cfg.seed + self.global_step)
        self.rng.bit_generator.state = s["np_rng"]
        self.filter.load_state_dict(s["filter"])  # surplus groups live on the CPU (dapo_lm.rollout)
        self.source.load_state_dict(s.get("prompts", {}))  # absent before --prompts existed (built-in tasks only)
        old = [grp for grp in self.filter.pending if "logp_old" not in grp]
        if old:  # carried by a version that rescored them at the next update: their behaviour policy is gone
            self.filter.pending = [grp for grp in self.filter.pending if "logp_old" in grp]
            warnings.warn(f"checkpoint: {len(old)} carried surplus groups of an older version have no behaviour "
                          "log-probabilities; discarded (their ratio could not be corrected)", stacklevel=2)
        self.health.load_state_dict(s["health"])
        self.health_counts.update(s["health_counts"])
        self.health_events = [{"detail": "", **e} for e in s["health_events"]]  # no detail before it was recorded
        self.recent.extend(s["recent"])

    def save(self) -> None:
        """Rank 0 writes: its state is every rank's."""
        if not self.shards.dist.is_main:
            return
        save_checkpoint(self.run_dir / "checkpoint.pt", self.state_dict())
