"""The README's two pictures from one finished run: its learning curve and a strip of frames from one episode of the
trained policy (``dapo eval RUN --video``, then evenly spaced frames side by side).

    dapo run --env MiniGrid-DoorKey-5x5-v0 --total-steps 100000 --seed 1 --run-dir runs/readme_doorkey
    python -m experiments.readme_figures runs/readme_doorkey --out docs/img
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from experiments.sweep import caller_path, parser, positive_int, script_main


def frame_strip(gif: Path, out: Path, frames: int) -> int:
    """``frames`` evenly spaced frames of ``gif`` (first and last included) side by side in one PNG; returns how many
    frames the episode had."""
    import imageio.v3 as iio
    import numpy as np

    video = iio.imread(gif, index=None)                       # (T, H, W, C)
    picks = np.unique(np.linspace(0, len(video) - 1, min(frames, len(video))).round().astype(int))
    gap = np.full((video.shape[1], 8, video.shape[3]), 255, dtype=video.dtype)
    row = [part for i in picks for part in (video[i], gap)][:-1]
    iio.imwrite(out, np.concatenate(row, axis=1))
    return len(video)


def main(argv=None, prog=None) -> int:
    p = parser(prog, __doc__)
    p.add_argument("run", type=caller_path, help="a finished run directory (learning_curve.png, checkpoint.pt)")
    p.add_argument("--out", type=caller_path, default=Path("docs/img"), help="folder for the two PNGs")
    p.add_argument("--frames", type=positive_int, default=8, help="frames in the strip")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    curve = args.run / "learning_curve.png"
    if not curve.is_file():
        p.error(f"{args.run} has no learning_curve.png (give a finished dapo run directory)")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "core.run.cli", "eval", str(args.run), "--episodes", "1", "--video", d],
                       check=True)
        gif = next(Path(d).glob("eval-episode-0.*"))
        length = frame_strip(gif, args.out / "episode_strip.png", args.frames)
    shutil.copyfile(curve, args.out / "learning_curve.png")
    print(f"wrote {args.out / 'learning_curve.png'} and {args.out / 'episode_strip.png'} ({length}-frame episode)")
    return 0


if __name__ == "__main__":
    script_main(main)
