"""The GPU check (issue #50): CUDA tests, one short end-to-end run per family, then throughput cuda vs cpu.

    python -m experiments.gpu_check --out DIR [--device cuda|cpu] [--tiny] [--budget-s 480]

Usually run by experiments/gpu_check.sh, which first installs the wheels the GPU image lacks. Parts, in
order, each in its own process with its own time limit (cut to what is left of ``--budget-s``), so that
one failure or hang costs only its own minutes:

  a  tests: tests/test_device.py on the device; end to end through the CLI on the device: DAPO on
     HalfCheetah-v5 (MuJoCo), PPO on ALE/Pong-v5 (Atari through ale-py), a Minari dataset collected with
     that policy and DAPO-DT trained on it (Decision Transformer), DAPO-MA on simple_spread_v3 (MPE),
     DAPO-LM on the add task (sequence generation)
  b  throughput, the same work on the device and on this machine's CPU: the MLP PPO/DAPO trainers on
     HalfCheetah-v5 with 1 and 64 envs, the Atari CNN (PPO) on Pong, the Decision Transformer's training
     step, and the sequence-generation trainer and its generation alone (``dapo_lm.bench``)
  c  results in DIR: summary.txt, tests.txt, e2e.txt, throughput.csv, throughput.md, log.txt

``--tiny`` (the CPU dry run, tests/test_gpu_check.py) runs every part at a few iterations. Exit status:
0 when every part passed (skips allowed), 1 otherwise, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
LOG_LIMIT = 4 << 20  # bytes of log.txt
ROW_FIELDS = ["part", "name", "device", "precision", "num_envs", "steps", "wall_s", "rate", "unit", "rate_e2e",
              "peak_gpu_mib"]


# --- throughput workers (``--bench NAME``: one process per part, one JSON row per line) ------------------
def _emit(**row) -> None:
    print("ROW " + json.dumps(row), flush=True)
    _emit.count += 1


_emit.count = 0


def _peak_reset(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _peak_mib(device: str):
    import torch

    if device != "cuda":
        return ""
    torch.cuda.synchronize()
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def auto_precision(device: str) -> str:
    """What ``--precision auto`` picks when training on ``device`` (on a GPU machine ``auto`` sees CUDA even
    for a CPU run, so the CPU rows ask the CPU's own preference explicitly)."""
    import torch

    if device == "cuda":
        return "bf16"
    probes = [getattr(torch.cpu, n, None) for n in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return "bf16" if any(p is not None and p() for p in probes) else "fp32"


def _trainer_row(part, name, env, algo, num_envs, num_steps, iters, device, **extra) -> None:
    """A fresh Trainer with the presets of ``env``; rate = steps per second of the iterations after the
    first (collect + advantage + update, from metrics.csv), rate_e2e = all steps over the whole wall time."""
    from core.training.logging import MetricLogger, read_metrics
    from core.run.runner import resolve_for_env
    from core.training.trainer import Trainer

    with tempfile.TemporaryDirectory() as d:
        cfg = resolve_for_env(dict(env=env, algo=algo, num_envs=num_envs, num_steps=num_steps,
                                   total_steps=iters * num_envs * num_steps, device=device, progress=False,
                                   tensorboard=False, eval_episodes=0, run_dir=d, **extra))
        _peak_reset(device)
        t0 = time.perf_counter()
        trainer = Trainer(cfg, Path(d))
        trainer.train(MetricLogger(Path(d), tensorboard=False))
        wall = time.perf_counter() - t0
        m = read_metrics(Path(d) / "metrics.csv")
        trainer.envs.close()
    per_iter = [sum(v) for v in zip(*(m[f"time/{k}_s"] for k in ("collect", "advantage", "update")))]
    steady = per_iter[1:] or per_iter
    _emit(part=part, name=name, device=device, precision=cfg.precision, num_envs=num_envs, steps=trainer.global_step,
          wall_s=round(wall, 2), rate=round(num_envs * num_steps * len(steady) / sum(steady), 1), unit="env steps/s",
          rate_e2e=round(trainer.global_step / wall, 1), peak_gpu_mib=_peak_mib(device))


def bench_mlp(devices: list[str], tiny: bool) -> None:
    for num_envs in (1, 64):
        for algo in ("ppo", "dapo"):
            for device in devices:
                _trainer_row("mlp", f"{algo} HalfCheetah-v5 x{num_envs}", "HalfCheetah-v5", algo, num_envs,
                             2048 // num_envs, 2 if tiny else 3, device)


def bench_atari(devices: list[str], tiny: bool) -> None:
    for device in devices:
        _trainer_row("atari", "ppo Pong-v5 CNN x8" if not tiny else "ppo Pong-v5 CNN x2", "ALE/Pong-v5", "ppo",
                     2 if tiny else 8, 32 if tiny else 128, 2 if tiny else 3, device, precision=auto_precision(device))


def bench_dt(devices: list[str], tiny: bool) -> None:
    """One DAPO-DT training step (forward, weighted imitation + value loss, backward, clip, AdamW) of the
    default Pong model (context 50, 3 layers, width 128, batch 16; 2 with ``tiny``) on a synthetic batch: the
    model's cost without the dataset sampling (CPU numpy, the same on both devices)."""
    import torch

    from dapo_dt.losses import weighted_action_loss
    from dapo_dt.config import DTConfig, resolve
    from dapo_dt.model import DecisionTransformer, DTModelConfig

    c = resolve(DTConfig(dataset="synthetic", env="ALE/Pong-v5"))  # the env named: no dataset is looked up
    B, K = 2 if tiny else c.batch_size, c.context_len
    torch.set_num_threads(c.torch_threads)  # as DTTrainer does (1 by default)
    for device in devices:
        torch.manual_seed(0)
        precision = auto_precision(device)
        model = DecisionTransformer(DTModelConfig(
            n_actions=6, context_len=K, n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd, dropout=c.dropout,
            advantage_modulation=True, value_head=True, bf16=precision == "bf16")).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=c.lr)
        g = torch.Generator().manual_seed(0)
        batch = [x.to(device) for x in (torch.randn(B, K, generator=g),
                                        torch.randint(0, 256, (B, K, 4, 84, 84), dtype=torch.uint8, generator=g),
                                        torch.randint(0, 6, (B, K), generator=g), torch.arange(K).repeat(B, 1),
                                        torch.ones(B, K, dtype=torch.bool), torch.randn(B, K, generator=g))]
        rtg, frames, actions, timesteps, mask, adv = batch

        def step():
            out = model(rtg, frames, actions, timesteps, mask, adv)
            loss, _ = weighted_action_loss(out.logits, actions, adv.exp().clamp(max=20), mask)
            loss = loss + c.value_coef * (out.values - rtg).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), c.max_grad_norm)
            opt.step()

        warm, timed = (1, 1) if tiny else ((5, 40) if device == "cuda" else (1, 4))
        for _ in range(warm):
            step()
        _peak_reset(device)
        t0 = time.perf_counter()
        for _ in range(timed):
            step()
        _peak_mib(device)  # synchronises
        wall = time.perf_counter() - t0
        _emit(part="dt", name=f"DT train step B{B} K{K}", device=device, precision=precision, num_envs="",
              steps=timed, wall_s=round(wall, 2), rate=round(timed * B * 3 * K / wall, 1), unit="tokens/s",
              rate_e2e=round(timed * B / wall, 2), peak_gpu_mib=_peak_mib(device))


def bench_lm(devices: list[str], tiny: bool) -> None:
    """The hook for the sequence-generation trainer: ``dapo_lm.bench.gpu_check_rows(device, tiny)`` yields
    dicts with name, steps, wall_s, rate, unit (and optionally precision)."""
    if importlib.util.find_spec("dapo_lm") is None:
        print("SKIP dapo_lm is not in this checkout: no sequence-generation throughput")
        return
    try:
        from dapo_lm.bench import gpu_check_rows
    except ImportError:
        print("SKIP dapo_lm has no bench.gpu_check_rows(device, tiny) yet")
        return
    for device in devices:
        _peak_reset(device)
        for row in gpu_check_rows(device, tiny):
            _emit(**{"part": "lm", "device": device, "precision": "", "num_envs": "", "rate_e2e": "", **row,
                     "peak_gpu_mib": _peak_mib(device)})


BENCHES = {"mlp": bench_mlp, "atari": bench_atari, "dt": bench_dt, "lm": bench_lm}


# --- driver ---------------------------------------------------------------------------------------------
class Check:
    def __init__(self, out: Path, budget_s: float, env: dict):
        self.out, self.deadline, self.env = out, time.monotonic() + budget_s, env
        self.results: list[tuple[str, str, float, str]] = []  # (part, status, seconds, note)
        self.log = open(out / "log.txt", "w")
        self.logged = 0

    def _write_log(self, text: str) -> None:
        if self.logged < LOG_LIMIT:
            self.log.write(text[: LOG_LIMIT - self.logged])
            self.logged += len(text)
            self.log.flush()

    def run(self, part: str, cmd: list[str], limit_s: float, note_prefix: str = "") -> tuple[str, str]:
        """Run ``cmd`` in a new process group, killed (the group) after ``limit_s`` or at the deadline; the
        note is the output's last line (starting with ``note_prefix``)."""
        left = self.deadline - time.monotonic() - 5
        if left < 10:
            self.results.append((part, "SKIP", 0.0, "no time left in the budget"))
            print(f"[gpu_check] {part}: SKIP (budget spent)", flush=True)
            return "SKIP", ""
        limit = min(limit_s, left)
        print(f"[gpu_check] {part}: {' '.join(cmd[1:])[:150]} (limit {limit:.0f}s)", flush=True)
        self._write_log(f"\n===== {part}: {' '.join(cmd)}\n")
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            text, _ = proc.communicate(timeout=limit)
            status = "PASS" if proc.returncode == 0 else f"FAIL (exit {proc.returncode})"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            text, _ = proc.communicate()
            status = f"TIMEOUT ({limit:.0f}s)"
        wall = time.monotonic() - t0
        self._write_log(text)
        skip = next((line[5:] for line in text.splitlines() if line.startswith("SKIP ")), "")
        if status == "PASS" and skip:
            status = "SKIP"
        note = skip or _last_line(text, note_prefix)
        self.results.append((part, status, wall, note))
        print(f"[gpu_check] {part}: {status} in {wall:.0f}s  {note[:120]}", flush=True)
        return status, text


NOISE = ("ROW ", "A.L.E", "[Powered", "WARNING: compiler attribute 'settotalmass'")


def _quiet(text: str) -> list[str]:
    return [x for x in text.strip().splitlines() if x.strip() and not x.startswith(NOISE)]


def _last_line(text: str, prefix: str = "") -> str:
    lines = [x for x in _quiet(text) if x.startswith(prefix)]
    return lines[-1].strip() if lines else ""


def machine(device: str) -> list[str]:
    import torch

    lines = [f"python {platform.python_version()} ({sys.executable}), torch {torch.__version__}, "
             f"cuda {torch.version.cuda}, cuda available {torch.cuda.is_available()}"]
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        lines.append(f"gpu: {p.name}, {p.total_memory / 2**30:.1f} GiB, {p.multi_processor_count} SMs")
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=15)
            lines.append(f"nvidia-smi: {smi.stdout.strip()}")
        except (OSError, subprocess.TimeoutExpired):
            pass
    cpu = next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
    lines.append(f"cpu: {cpu}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    from importlib import metadata

    versions = []
    for name in ("numpy", "gymnasium", "mujoco", "ale-py", "pettingzoo", "mpe2", "minari", "envpool"):
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} -")
    lines.append("packages: " + ", ".join(versions))
    return lines


def e2e_commands(device: str, tiny: bool, tmp: Path) -> list[tuple[str, list[str], float]]:
    """(name, dapo command line, time limit in seconds): one short run per family on ``device``."""
    quiet = ["--device", device, "--no-progress"]
    pong, ds = tmp / "pong", "gpucheck/pong-v0"
    if tiny:
        mujoco = ["--total-steps", "512", "--num-envs", "2", "--num-steps", "256"]
        atari = ["--total-steps", "256", "--num-envs", "2", "--num-steps", "64"]
        collect = ["--steps", "1", "--num-envs", "1"]
        dt = ["--grad-steps", "4", "--eval-every", "4", "--context-len", "8", "--n-embd", "32", "--batch-size", "4",
              "--eval-max-steps", "100", "--online-steps", "64", "--online-envs", "1"]
        ma = ["--total-steps", "300", "--num-envs", "2", "--num-steps", "25", "--num-epochs", "2"]
        lm = ["--total-steps", "16", "--warm-start-steps", "2", "--prompts-per-batch", "2", "--group-size", "4",
              "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--eval-problems", "4"]
    else:
        mujoco = ["--total-steps", "8192", "--num-envs", "4", "--num-steps", "512"]
        atari = ["--total-steps", "4096"]
        collect = ["--steps", "2000", "--num-envs", "4"]
        dt = ["--grad-steps", "200", "--eval-every", "200", "--eval-max-steps", "1000", "--online-steps", "500",
              "--online-envs", "2"]
        ma = ["--total-steps", "20000"]
        lm = ["--total-steps", "1024", "--warm-start-steps", "200", "--eval-problems", "100"]
    return [
        ("e2e mujoco", ["run", "--env", "HalfCheetah-v5", "--algo", "dapo", "--recipe", "dapo-mujoco", *mujoco,
                        "--eval-episodes", "1",
                        "--no-tensorboard", "--run-dir", str(tmp / "mujoco"), *quiet], 90),
        ("e2e atari", ["run", "--env", "ALE/Pong-v5", "--algo", "ppo", "--backend", "sync", *atari,
                       "--eval-episodes", "1", "--no-tensorboard", "--run-dir", str(pong), *quiet], 120),
        ("e2e dataset", ["dataset", "collect", "--env", "ALE/Pong-v5", "--policy", str(pong), *collect,
                         "--name", ds], 90),
        ("e2e dt", ["run", "--algo", "dapo-dt", "--env", "ALE/Pong-v5", "--dataset", ds, *dt, "--eval-episodes", "1",
                    "--run-dir", str(tmp / "dt"), *quiet], 120),
        ("e2e mpe", ["run", "--algo", "dapo-ma", "--env", "simple_spread_v3", *ma, "--eval-episodes", "1",
                     "--no-tensorboard", "--run-dir", str(tmp / "ma"), *quiet], 90),
        ("e2e lm", ["run", "--algo", "dapo-lm", *lm, "--no-tensorboard", "--run-dir", str(tmp / "lm"), *quiet], 90),
    ]


def write_throughput(rows: list[dict], out: Path) -> None:
    with open(out / "throughput.csv", "w", newline="") as f:
        w = csv.DictWriter(f, ROW_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    lines = ["| run | unit | cuda | cpu | cuda/cpu | peak GPU MiB | precision cuda / cpu |", "|---|---|---:|---:|---:|---:|---|"]
    for name in dict.fromkeys(r["name"] for r in rows):
        by = {r["device"]: r for r in rows if r["name"] == name}
        cu, cp = by.get("cuda"), by.get("cpu")
        ratio = f"{cu['rate'] / cp['rate']:.2f}" if cu and cp and cp["rate"] else "-"
        unit = (cu or cp)["unit"]
        lines.append(f"| {name} | {unit} | {cu['rate'] if cu else '-'} | {cp['rate'] if cp else '-'} | {ratio} | "
                     f"{cu['peak_gpu_mib'] if cu else '-'} | {cu['precision'] if cu else '-'} / "
                     f"{cp['precision'] if cp else '-'} |")
    (out / "throughput.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="results folder (at most 6 files are written)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="device under test (default: cuda)")
    p.add_argument("--tiny", action="store_true", help="a few iterations of everything (the CPU dry run)")
    p.add_argument("--budget-s", type=float, default=480, help="wall-clock budget of all parts (default: 480)")
    p.add_argument("--bench", choices=list(BENCHES), help=argparse.SUPPRESS)
    p.add_argument("--devices", default="cuda,cpu", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.bench:
        BENCHES[args.bench](args.devices.split(","), args.tiny)
        print(f"{_emit.count} rows")
        return 0
    if args.out is None:
        p.error("--out DIR is required")
    if args.budget_s <= 0:
        p.error(f"--budget-s must be > 0, got {args.budget_s}")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: error: CUDA is not available (gpu_check.sh --dry-run rehearses the check on the CPU)",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    tmp = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MINARI_DATASETS_PATH": str(tmp / "minari")}
    check = Check(args.out, args.budget_s, env)
    t0 = time.monotonic()
    # a: tests and end-to-end runs
    _, tests = check.run("tests", [PY, "-m", "pytest", "tests/test_device.py", "--device", args.device, "-q",
                                   "-p", "no:cacheprovider"], 150)
    (args.out / "tests.txt").write_text("\n".join(tests.splitlines()[-300:]) + "\n")
    e2e = []
    for name, cmd, limit in e2e_commands(args.device, args.tiny, tmp):
        status, text = check.run(name, [PY, "-m", "core", *cmd], limit, "steps:" if "dataset" in cmd else "")
        e2e.append(f"## {name}: {status}\n$ dapo {' '.join(cmd)}\n" + "\n".join(_quiet(text)[-6:]))
    (args.out / "e2e.txt").write_text("\n\n".join(e2e) + "\n")
    # b: throughput
    devices = ["cuda", "cpu"] if args.device == "cuda" else ["cpu"]
    rows = []
    limits = {"mlp": 150, "atari": 100, "dt": 60, "lm": 60}
    for bench, limit in limits.items():
        _, text = check.run(f"throughput {bench}", [PY, "-m", "experiments.gpu_check", "--bench", bench,
                                                       "--devices", ",".join(devices)]
                            + (["--tiny"] if args.tiny else []), limit)
        rows += [json.loads(x[4:]) for x in text.splitlines() if x.startswith("ROW ")]
    write_throughput(rows, args.out)
    # c: summary
    failed = [r for r in check.results if r[1] not in ("PASS", "SKIP")]
    lines = [f"# GPU check {started}, device {args.device}{' (tiny dry run)' if args.tiny else ''}, "
             f"{time.monotonic() - t0:.0f}s of a {args.budget_s:.0f}s budget", *machine(args.device), ""]
    lines += [f"{part:20s} {status:16s} {wall:6.0f}s  {note[:160]}" for part, status, wall, note in check.results]
    lines += ["", (open(args.out / "throughput.md").read()), f"gpu_check: {len(check.results) - len(failed)} of "
              f"{len(check.results)} parts passed or skipped; {len(failed)} failed"
              + (": " + ", ".join(r[0] for r in failed) if failed else "")]
    (args.out / "summary.txt").write_text("\n".join(lines) + "\n")
    check.log.close()
    print("\n".join(lines), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
