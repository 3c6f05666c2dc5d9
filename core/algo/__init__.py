"""Layer 2, algo: the algorithms' pure parts (losses, advantages and GAE, DAPO's dynamic sampler, schedules of lr and
clips, health monitors and remedies, networks and their NumPy twins, the proximal anchor), usable on their own.
May import ``core.config`` only."""
