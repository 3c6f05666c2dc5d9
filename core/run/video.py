"""Videos of evaluation episodes (``dapo eval RUN_DIR --video DIR``, ``Agent.evaluate(video_dir=DIR)``).

One file per episode, ``DIR/eval-episode-<i>.<ext>``, in the first format that the installed packages can write
(nothing is downloaded): MP4 through Gymnasium's ``RecordVideo`` when moviepy is installed, else MP4 through
imageio's ffmpeg plugin (imageio-ffmpeg), else an animated GIF through Pillow (imageio's own dependency).  The env
is made with ``render_mode="rgb_array"`` (classic control, MuJoCo, MiniGrid, users' envs that take it); Atari games
render the emulator's colour screen (core/envs/atari.py).  Other families write their envs' frames through
:class:`EpisodeWriter` (dapo_ma: PettingZoo envs made with ``render_mode="rgb_array"``).
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Optional

import gymnasium as gym
import numpy as np

from core.config.errors import ConfigError

PREFIX = "eval"


def check_video_dir(path: Path) -> Path:
    """``path`` unless it (or a folder above it) is a file: one line then, before anything runs."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise ConfigError(f"--video {path}: {p} is a file; give a directory (created if missing)")
            break
    return path


def video_format() -> str:
    """``recordvideo`` (moviepy: Gymnasium's RecordVideo, MP4), ``mp4`` (imageio + imageio-ffmpeg) or ``gif``
    (Pillow); a one-line error naming what to install when none is there."""
    have = {m: importlib.util.find_spec(m) is not None for m in ("moviepy", "imageio", "imageio_ffmpeg", "PIL")}
    if have["moviepy"]:
        return "recordvideo"
    if have["imageio"] and have["imageio_ffmpeg"]:
        return "mp4"
    if have["PIL"]:
        return "gif"
    raise ConfigError("--video needs imageio (GIF; with imageio-ffmpeg or moviepy: MP4): pip install imageio "
                      "imageio-ffmpeg (or the toolkit's extra: pip install -e '.[video]')")


def frame_format() -> str:
    """The format of :class:`EpisodeWriter`: ``mp4`` (imageio + imageio-ffmpeg, which moviepy brings too) or ``gif``;
    for envs that Gymnasium's ``RecordVideo`` cannot wrap (PettingZoo's)."""
    fmt = video_format()
    return fmt if fmt != "recordvideo" else "mp4" if importlib.util.find_spec("imageio_ffmpeg") else "gif"


class EpisodeWriter:
    """Writes the frames ``(H, W, 3)`` uint8 of one episode after another to ``folder/eval-episode-<i>.mp4``
    (imageio-ffmpeg, streamed) or ``.gif`` (Pillow; frames kept as 8-bit palette images until the episode ends)."""

    def __init__(self, folder: Path, fmt: str, fps: float, source: str = "env"):
        self.folder, self.fmt, self.fps, self.source, self.episode = Path(folder), fmt, fps, source, 0
        self._frames: list = []
        self._writer = None

    def add(self, frame) -> None:
        if not isinstance(frame, np.ndarray) or frame.ndim != 3:
            raise ConfigError(f"env {self.source} rendered no rgb_array frame (got {type(frame).__name__}); --video "
                              "needs an env that renders rgb_array frames")
        if self.fmt == "mp4":
            if self._writer is None:
                import imageio.v2 as imageio

                self._writer = imageio.get_writer(self._path(), fps=self.fps, macro_block_size=1)
            self._writer.append_data(frame)
        else:
            from PIL import Image

            self._frames.append(Image.fromarray(frame.astype(np.uint8)).quantize(
                colors=256, method=Image.Quantize.FASTOCTREE))  # ~4x faster than median cut

    def _path(self) -> Path:
        return self.folder / f"{PREFIX}-episode-{self.episode}.{self.fmt}"

    def finish(self) -> None:
        """End the episode: write its file (nothing if it had no frame)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        elif self._frames:
            first, *rest = self._frames
            first.save(self._path(), save_all=True, append_images=rest, loop=0,
                       duration=max(20, round(1000 / self.fps)))
            self._frames = []
        else:
            return
        self.episode += 1


class FrameRecorder(gym.Wrapper):
    """A Gymnasium env whose episodes are written by an :class:`EpisodeWriter` (frame after reset and each step)."""

    def __init__(self, env: gym.Env, folder: Path, fmt: str):
        super().__init__(env)
        self.writer = EpisodeWriter(folder, fmt, float(env.metadata.get("render_fps") or 30),
                                    str(env.spec.id if env.spec else env))

    def reset(self, **kwargs):
        self.writer.finish()
        out = self.env.reset(**kwargs)
        self.writer.add(self.env.render())
        return out

    def step(self, action):
        out = self.env.step(action)
        self.writer.add(self.env.render())
        if out[2] or out[3]:
            self.writer.finish()
        return out

    def close(self):
        self.writer.finish()
        super().close()


def recording_env(env_id: str, env_kwargs: Optional[dict], folder: Path) -> gym.Env:
    """One evaluation env of ``env_id`` (on Atari the toolkit's whole games, as :func:`core.run.evaluation.
    evaluation_envs`) rendering ``rgb_array`` frames, recording every episode into ``folder``."""
    from core.envs.make import is_atari, make_env

    fmt = video_format()
    check_video_dir(folder)
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame's rgb_array needs no screen: no SDL error line
    if is_atari(env_id):
        from core.envs.atari import AtariGame, game_name

        if env_kwargs:
            raise ConfigError("--env-kwargs are not supported for Atari ids (their preprocessing is fixed); drop them")
        game, full = game_name(env_id)
        env: gym.Env = AtariGame(game, training=False, full_action_space=full, render_mode="rgb_array")
    else:
        env = make_env(env_id, env_kwargs, render_mode="rgb_array")
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "recordvideo":
        return gym.wrappers.RecordVideo(env, str(folder), episode_trigger=lambda _: True, name_prefix=PREFIX,
                                        disable_logger=True)
    return FrameRecorder(env, folder, fmt)
