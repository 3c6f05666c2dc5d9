"""The benchmark's run folders, ``<runs-dir>/<suite>/<env>/<variant>/s<seed>``, for scripts that read them
after the fact (experiments/halfcheetah_posture.py, experiments/adam_step_share.py)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence


def add_run_folder_arguments(p: argparse.ArgumentParser, variants_required: bool) -> None:
    """--runs-dir, --suites, --variants and --out, worded alike in every such script."""
    p.add_argument("--runs-dir", type=Path, required=True, help="the benchmark's --runs-dir")
    p.add_argument("--suites", nargs="+", default=["main"], help="suites under --runs-dir to read")
    p.add_argument("--variants", nargs="+" if variants_required else "*", required=variants_required, default=None,
                   help="variants to read" + ("" if variants_required else " (default: all found)"))
    p.add_argument("--out", type=Path, required=True, help="results folder (results.csv, results.md)")


def finished_runs(runs_dir: Path, suites: Sequence[str], envs: Optional[Sequence[str]] = None,
                  variants: Optional[Sequence[str]] = None) -> list[Path]:
    """Run folders with a summary.json (finished), sorted; ``None`` filters keep every env / variant."""
    return sorted(d for suite in suites for d in (runs_dir / suite).glob("*/*/s*")
                  if (d / "summary.json").exists() and (envs is None or d.parent.parent.name in envs)
                  and (variants is None or d.parent.name in variants))


def run_key(d: Path) -> dict:
    """``{"suite", "env", "variant", "seed"}`` of a run folder."""
    return {"suite": d.parent.parent.parent.name, "env": d.parent.parent.name, "variant": d.parent.name,
            "seed": int(d.name[1:])}
