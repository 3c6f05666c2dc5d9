"""Layer 6, run: what a user runs: recipes and presets, the family registry, the runner and run directories,
evaluation, the Python API, the ``dapo`` CLI, docs and plots.  May import every layer below (``core.config``,
``algo``, ``envs``, ``extensions``, ``training``), never a family package or experiments/ (they register
themselves: :mod:`core.run.registry`)."""
