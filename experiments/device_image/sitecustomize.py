"""Imported at start-up by every Python process of ``gpu_check.sh --dry-run`` (this folder is put first on
PYTHONPATH): only the distributions of the GPU image (``packages.txt``) and what they require, the wheels
installed into ``$DAPO_WHEEL_SITE`` and this repository can be imported; any other installed package is
not found, as on the bare image.  The requirements are this machine's versions' (the image's versions of
the same packages bring their own), so a package that only a newer version here needs stays visible."""
import os
import re
import sys
from importlib import machinery, metadata
from pathlib import Path


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _HidingPathFinder:
    """sys.path's finder, blind to the top-level modules of hidden distributions (so that probes such as
    ``importlib.util.find_spec`` see them missing too, not only ``import``)."""

    def __init__(self, hidden: set, hidden_dists: set):
        self.hidden, self.hidden_dists = hidden, hidden_dists

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.hidden:
            return None
        return machinery.PathFinder.find_spec(name, path, target)

    def find_distributions(self, context=metadata.DistributionFinder.Context()):
        """importlib.metadata's view: the hidden distributions' metadata is missing too."""
        return (d for d in machinery.PathFinder.find_distributions(context) if _visible(d, self.hidden_dists))

    def invalidate_caches(self):
        machinery.PathFinder.invalidate_caches()


def _visible(dist, hidden_dists: set) -> bool:
    return (_norm(dist.metadata["Name"] or "") not in hidden_dists
            or Path(dist.locate_file("")).resolve() == Path(os.environ["DAPO_WHEEL_SITE"]).resolve())


def _image_closure(listed: set) -> set:
    """The listed distributions and, recursively, what their installed versions require (extras aside)."""
    from packaging.requirements import Requirement

    installed = {_norm(d.metadata["Name"]): d for d in metadata.distributions() if d.metadata["Name"]}
    allowed, todo = set(), [n for n in listed if n in installed]
    while todo:
        name = todo.pop()
        if name in allowed:
            continue
        allowed.add(name)
        for text in installed[name].requires or []:
            req = Requirement(text)
            if (req.marker is None or req.marker.evaluate({"extra": ""})) and _norm(req.name) in installed:
                todo.append(_norm(req.name))
    return allowed | listed


def _install() -> None:
    listed = Path(__file__).with_name("packages.txt").read_text().splitlines()
    allowed = _image_closure({_norm(x) for x in listed if x and not x.startswith("#")}) | {"dapo-toolkit"}
    site = Path(os.environ["DAPO_WHEEL_SITE"]).resolve()
    carried = {p.name.partition(".")[0] for p in site.iterdir()} if site.is_dir() else set()
    hidden = {top for top, dists in metadata.packages_distributions().items()
              if top not in carried and not any(_norm(d) in allowed for d in dists)}
    hidden_dists = {_norm(d.metadata["Name"]) for d in metadata.distributions()
                    if d.metadata["Name"] and _norm(d.metadata["Name"]) not in allowed}
    sys.meta_path[:] = [_HidingPathFinder(hidden, hidden_dists) if f is machinery.PathFinder else f
                        for f in sys.meta_path]


if os.environ.get("DAPO_WHEEL_SITE"):
    _install()
