"""Which of the toolkit's files one training iteration runs, and how many lines they hold (issue #54's "files one
reads to follow one update end to end").

Builds a Trainer for a short run, runs one iteration untraced (so that start-up code does not count), then traces a
second ``Trainer.iterate()`` and lists every file of ``core``/``dapo_*`` whose code ran, with its line count.
Logging, checkpointing and progress output are outside ``iterate`` and do not count.

    python -m experiments.read_path --env CartPole-v1
    python -m experiments.read_path --env HalfCheetah-v5 --recipe dapo-mujoco
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def files_run(env: str, algo: str = "dapo", extra: dict | None = None) -> dict[str, int]:
    from core.run.runner import resolve_for_env
    from core.training.trainer import Trainer

    explicit = {"env": env, "algo": algo, "num_envs": 2, "num_steps": 64, "total_steps": 4096, **(extra or {})}
    cfg = resolve_for_env(explicit)
    with tempfile.TemporaryDirectory() as d:
        trainer = Trainer(cfg, Path(d))
        trainer.iterate()
        seen: set[str] = set()

        def tracer(frame, event, arg):
            f = frame.f_code.co_filename
            rel = f[len(str(ROOT)) + 1:] if f.startswith(str(ROOT)) else ""
            if rel.split("/")[0] in ("core", "dapo_ma", "dapo_dt", "dapo_lm"):
                seen.add(f)
            return None

        sys.setprofile(tracer)
        try:
            trainer.iterate()
        finally:
            sys.setprofile(None)
        trainer.rollouts.close() if hasattr(trainer.rollouts, "close") else None
    return {str(Path(f).relative_to(ROOT)): len(Path(f).read_text().splitlines()) for f in sorted(seen)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--algo", default="dapo")
    p.add_argument("--recipe", action="append", default=[], help="a recipe to apply (repeatable), e.g. dapo-mujoco")
    a = p.parse_args(argv)
    files = files_run(a.env, a.algo, {"recipe": tuple(a.recipe)} if a.recipe else None)
    for f, n in files.items():
        print(f"{n:5d}  {f}")
    print(f"{sum(files.values()):5d}  lines in {len(files)} files ({a.algo} on {a.env})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
