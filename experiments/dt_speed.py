"""DT gradient steps per second on MuJoCo-shaped states: dapo_dt's DT beside transformers' DecisionTransformerModel
(issue 55 item 5), side by side in one process, and where the time goes.

Shape: the DT paper's MuJoCo configuration (state 17, action 6 as HalfCheetah, context K=20, batch 64, width 128,
3 layers, 1 head, dropout 0.1, AdamW lr 1e-4, weight decay 1e-4 on matrices, gradient-norm clip).  Ours is a real
``DTTrainer`` (algo dt) on a synthetic Minari dataset of that shape, stepped as ``train_step`` steps it; the
transformers model gets our weights copied in (its GPT-2 positional table set to ours, all zero: the timestep
embedding is the only position signal in both) and the same batch, the same masked MSE of the tanh head's actions,
the same clip and the same AdamW groups.  Before timing, both are checked to give the same actions, the same loss and
the same gradients (eval mode, no dropout).  The HF model also computes its state and return heads, as its
forward always does.  ``--activation``: both models' MLP activation, ReLU (the DT paper's MuJoCo model and the HF
config's default) or GPT-2's tanh GELU (dapo_dt's default, its Atari model).

Timing: ``--reps`` interleaved repeats (who goes first alternates) of ``--steps`` gradient steps each, after
``--warmup`` untimed steps, torch ``--threads`` threads.  Per step: sampling the batch (ours only: HF has no data
pipeline), forward + loss, backward, clip + optimiser.  The model-step ratio (ours / HF steps per second, forward to
optimiser) is given per repeat and as the median with its range.

    python -m experiments.dt_speed --reps 5 --steps 40 --out experiments/results/dt_mujoco/speed.md
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from experiments.sweep import caller_path, parser, script_main

STATE, ACT, K, BATCH, WIDTH, LAYERS, HEADS = 17, 6, 20, 64, 128, 3, 1
PHASES = ("sample", "forward", "backward", "optimizer")


def write_dataset(folder: Path, episodes: int = 20, length: int = 1000, seed: int = 0):
    """A Minari dataset of random HalfCheetah-shaped episodes (17-d states, 6-d actions in [-1, 1]) in ``folder``
    (made Minari's local store: ``MINARI_DATASETS_PATH``)."""
    import gymnasium as gym
    import minari
    from minari.data_collector import EpisodeBuffer

    rng = np.random.default_rng(seed)
    bufs = [EpisodeBuffer(id=i, observations=rng.normal(size=(length + 1, STATE)).astype(np.float32),
                          actions=rng.uniform(-1, 1, (length, ACT)).astype(np.float32),
                          rewards=rng.normal(size=length).tolist(), terminations=[False] * length,
                          truncations=[False] * (length - 1) + [True]) for i in range(episodes)]
    import os

    os.environ["MINARI_DATASETS_PATH"] = str(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minari.create_dataset_from_buffers(
            "speed/random-v0", bufs, observation_space=gym.spaces.Box(-np.inf, np.inf, (STATE,), np.float32),
            action_space=gym.spaces.Box(-1.0, 1.0, (ACT,), np.float32), algorithm_name="random")
    return folder / "speed" / "random-v0"


def our_trainer(dataset: Path, run_dir: Path, threads: int, activation: str):
    from dapo_dt.config import DTConfig, resolve
    from dapo_dt.trainer import DTTrainer

    cfg = resolve(DTConfig(dataset_path=str(dataset), env="HalfCheetah-v5", algo="dt", context_len=K,
                           batch_size=BATCH, n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS, dropout=0.1, lr=1e-4,
                           weight_decay=1e-4, warmup_steps=10, grad_steps=10**6, precision="fp32",
                           torch_threads=threads, device="cpu", activation=activation))
    return DTTrainer(cfg, run_dir)


def hf_model(ours):
    """transformers' DecisionTransformerModel at our shape with our weights."""
    import torch
    from transformers import DecisionTransformerConfig, DecisionTransformerModel

    c = ours.cfg
    hf = DecisionTransformerModel(DecisionTransformerConfig(
        state_dim=c.state_dim, act_dim=c.act_dim, hidden_size=c.n_embd, max_ep_len=c.max_timestep, action_tanh=True,
        n_layer=c.n_layer, n_head=c.n_head, n_inner=4 * c.n_embd, activation_function=c.activation,
        n_positions=3 * c.context_len, resid_pdrop=c.dropout, embd_pdrop=c.dropout, attn_pdrop=c.dropout))
    ours_sd = ours.state_dict()
    mapped = {f"encoder.{k[4:]}": v for k, v in ours_sd.items() if k.startswith("gpt.")}
    for a, b in (("embed_timestep", "embed_timestep"), ("embed_return", "embed_return"), ("embed_state", "embed_state"),
                 ("embed_action", "embed_action"), ("embed_ln", "embed_ln"), ("action_head.0", "predict_action.0")):
        for p in ("weight", "bias"):
            if f"{a}.{p}" in ours_sd:
                mapped[f"{b}.{p}"] = ours_sd[f"{a}.{p}"]
    missing, unexpected = hf.load_state_dict(mapped, strict=False)
    left = [k for k in missing if not k.startswith(("predict_state", "predict_return", "encoder.wte"))]
    assert not left and not unexpected, (left, unexpected)
    hf.encoder.wpe.weight.requires_grad_(False)  # ours keeps its (zero) position table frozen
    return hf.to(torch.float32)


def hf_loss(hf, ours, b):
    """The masked MSE of HF's action predictions; states normalised by our model's statistics (HF expects them
    normalised), returns-to-go scaled alike."""
    from dapo_dt.losses import weighted_mse_action_loss

    states = (b.frames.float() - ours.state_mean) / ours.state_std
    out = hf(states=states, actions=b.actions, returns_to_go=b.rtg.unsqueeze(-1), timesteps=b.timesteps,
             attention_mask=b.mask.long(), return_dict=True)
    return weighted_mse_action_loss(out.action_preds, b.actions, None, b.mask)[0]


def optimizer(model, lr=1e-4, wd=1e-4):
    import torch

    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}], lr=lr,
                             betas=(0.9, 0.95))


def check_same(tr, hf, batch) -> dict[str, float]:
    """Eval mode: the same loss and the same gradients of the shared weights (max abs differences)."""
    import torch

    tr.model.eval(), hf.eval()
    b = batch._replace(rtg=batch.rtg / tr.scale)
    a_loss = tr.offline_loss(batch)[0]
    tr.model.zero_grad(), hf.zero_grad()
    a_loss.backward()
    h_loss = hf_loss(hf, tr.model, b)
    h_loss.backward()
    grad = max(float((tr.model.embed_state.weight.grad - hf.embed_state.weight.grad).abs().max()),
               float((tr.model.gpt.h[0].attn.c_attn.weight.grad - hf.encoder.h[0].attn.c_attn.weight.grad).abs().max()))
    tr.model.zero_grad(), hf.zero_grad()
    with torch.no_grad():
        out = tr.model(b.rtg, b.frames, b.actions, b.timesteps, b.mask).logits
        states = (b.frames.float() - tr.model.state_mean) / tr.model.state_std
        hout = hf(states=states, actions=b.actions, returns_to_go=b.rtg.unsqueeze(-1), timesteps=b.timesteps,
                  attention_mask=b.mask.long(), return_dict=True).action_preds
    m = b.mask.bool()
    a_loss, h_loss = float(a_loss.detach()), float(h_loss.detach())
    return {"loss_ours": a_loss, "loss_hf": h_loss, "loss_diff": abs(a_loss - h_loss),
            "action_diff": float((out - hout)[m].abs().max()), "grad_diff": grad}


def ours_steps(tr, n: int, times: dict[str, float]) -> None:
    """``n`` of ``DTTrainer.train_step``'s steps with the phases timed apart (the same calls, in its order)."""
    import torch

    c = tr.cfg
    tr.model.train()
    for _ in range(n):
        t0 = time.perf_counter()
        for g in tr.optimizer.param_groups:
            g["lr"] = tr.lr_at(tr.grad_step)
        b = tr.data.sample(c.batch_size, c.context_len, tr.rng, tr.device)
        t1 = time.perf_counter()
        loss, _ = tr.offline_loss(b)
        assert torch.isfinite(loss)
        t2 = time.perf_counter()
        tr.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        tr.clip_gradients()
        tr.optimizer.step()
        tr.grad_step += 1
        float(loss.detach())
        t4 = time.perf_counter()
        for k, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            times[k] += dt


def hf_steps(hf, ours, opt, batches, times: dict[str, float]) -> None:
    import torch

    hf.train()
    for b in batches:
        t1 = time.perf_counter()
        loss = hf_loss(hf, ours, b)
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_([p for p in hf.parameters() if p.requires_grad], 1.0)
        opt.step()
        float(loss.detach())
        t4 = time.perf_counter()
        for k, dt in zip(PHASES[1:], (t2 - t1, t3 - t2, t4 - t3)):
            times[k] += dt


def top_ops(tr, steps: int = 3, n: int = 10) -> str:
    """A markdown table of the ``n`` ops with the most self CPU time over ``steps`` of our gradient steps."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        ours_steps(tr, steps, dict.fromkeys(PHASES, 0.0))
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)
    rows = "\n".join(f"| `{e.key}` | {e.count // steps} | {e.self_cpu_time_total / 1000 / steps:.1f} | "
                     f"{100 * e.self_cpu_time_total / total:.0f}% |" for e in events[:n])
    return f"| op | calls per step | self ms per step | share |\n|---|---|---|---|\n{rows}"


def report(rows: list[dict], phases: dict[str, dict[str, float]], check: dict, args, ops: str = "") -> str:
    ratios = [r["ours"] / r["hf"] for r in rows]
    table = "\n".join(f"| {i + 1} | {r['first']} | {r['ours']:.1f} | {r['hf']:.1f} | {r['ours'] / r['hf']:.2f} |"
                      for i, r in enumerate(rows))
    total = {k: sum(v.values()) for k, v in phases.items()}
    steps = args.reps * args.steps

    def share(who):
        return " | ".join(f"{1000 * phases[who].get(k, 0.0) / steps:.2f} ms ({100 * phases[who].get(k, 0.0) / total[who]:.0f}%)"
                          for k in PHASES)
    return (f"# DT gradient steps per second on MuJoCo-shaped states: ours vs transformers' DecisionTransformerModel\n\n"
            f"Shape: state {STATE}, action {ACT}, context {K}, batch {BATCH}, width {WIDTH}, {LAYERS} layers, {HEADS} "
            f"head, {args.activation}, dropout 0.1, AdamW; fp32 on the CPU, torch {args.threads} thread(s).\n\n"
            f"Same computation, checked before timing (eval mode, our weights copied into HF): loss {check['loss_ours']:.6f} "
            f"vs {check['loss_hf']:.6f} (|diff| {check['loss_diff']:.1e}), actions max |diff| {check['action_diff']:.1e}, "
            f"gradients max |diff| {check['grad_diff']:.1e}.\n\n"
            f"Model steps per second (forward + loss, backward, clip + AdamW; ours without sampling its batch):\n\n"
            f"| repeat | first | ours | HF | ours / HF |\n|---|---|---|---|---|\n{table}\n\n"
            f"Median ratio {np.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f}) over {args.reps} "
            f"interleaved repeats of {args.steps} steps.\n\n"
            f"Where the time goes (mean per step over all timed steps):\n\n"
            f"| | {' | '.join(PHASES)} |\n|---|---|---|---|---|\n| ours | {share('ours')} |\n| HF | {share('hf')} |\n\n"
            + (f"Our step's most expensive ops (torch.profiler, self CPU time, 3 steps):\n\n{ops}\n\n" if ops else "") +
            f"Command: `python -m experiments.dt_speed --reps {args.reps} --steps {args.steps} --warmup {args.warmup} "
            f"--threads {args.threads} --activation {args.activation}`; {machine()}, Python {platform.python_version()}, torch {torch_version()}.\n")


def machine() -> str:
    """The CPU model, core count and the 1-minute load average when the run ended (other work on the machine)."""
    import os

    model = platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"{model}, {os.cpu_count()} cores{load}"


def torch_version() -> str:
    import torch
    import transformers

    return f"{torch.__version__}, transformers {transformers.__version__}"


def main(argv=None, prog=None) -> int:
    p = parser(prog, __doc__)
    p.add_argument("--reps", type=int, default=5, help="interleaved repeats [5]")
    p.add_argument("--steps", type=int, default=40, help="timed gradient steps per model per repeat [40]")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps per model first [5]")
    p.add_argument("--threads", type=int, default=1, help="torch threads [1]")
    p.add_argument("--activation", choices=("relu", "gelu"), default="relu",
                   help="both models' MLP activation: relu (the DT paper's MuJoCo model, HF's default) or gelu [relu]")
    p.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True,
                   help="list our step's most expensive ops (torch.profiler, 3 steps) [on]")
    p.add_argument("--out", type=caller_path, help="write the report here (markdown) as well as printing it")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.reps < 1 or args.steps < 1 or args.warmup < 0 or not 1 <= args.threads <= 256:
        p.error(f"--reps and --steps must be >= 1, --warmup >= 0, --threads 1 .. 256; got {args.reps}, {args.steps}, "
                f"{args.warmup}, {args.threads}")
    import torch

    with tempfile.TemporaryDirectory() as d:
        tr = our_trainer(write_dataset(Path(d) / "minari"), Path(d) / "run", args.threads, args.activation)
        torch.set_num_threads(args.threads)
        hf = hf_model(tr.model)
        batch = tr.data.sample(BATCH, K, np.random.default_rng(1), tr.device)
        check = check_same(tr, hf, batch)
        print(f"same computation: {check}", flush=True)
        opt = optimizer(hf)
        rng = np.random.default_rng(2)
        pool = [tr.data.sample(BATCH, K, rng, tr.device) for _ in range(16)]
        pool = [b._replace(rtg=b.rtg / tr.scale) for b in pool]  # HF's batches: the same scaled returns-to-go
        phases = {"ours": dict.fromkeys(PHASES, 0.0), "hf": dict.fromkeys(PHASES[1:], 0.0)}
        ours_steps(tr, args.warmup, dict.fromkeys(PHASES, 0.0))
        hf_steps(hf, tr.model, opt, pool[:args.warmup], dict.fromkeys(PHASES, 0.0))
        rows = []
        for rep in range(args.reps):
            rate = {}
            for who in ("ours", "hf") if rep % 2 == 0 else ("hf", "ours"):
                t = dict.fromkeys(PHASES, 0.0)
                if who == "ours":
                    ours_steps(tr, args.steps, t)
                else:
                    hf_steps(hf, tr.model, opt, [pool[i % len(pool)] for i in range(args.steps)], t)
                rate[who] = args.steps / sum(t[k] for k in PHASES[1:])  # model time: forward to optimiser
                for k in phases[who]:
                    phases[who][k] += t[k]
            rows.append({**rate, "first": "ours" if rep % 2 == 0 else "HF"})
            print(f"repeat {rep + 1}: ours {rate['ours']:.1f} steps/s, HF {rate['hf']:.1f} steps/s", flush=True)
        ops = top_ops(tr) if args.profile else ""
    text = report(rows, phases, check, args, ops)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    script_main(main)
