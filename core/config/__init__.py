"""Layer 1, config: the errors every layer raises (``ConfigError``), the options dataclasses and their checks, the
shared option groups, the limits a run may ask of the machine, fields as flags, value and YAML parsing, old configs'
translation, and the trust rule for envs that import code.  Imports no other layer of ``core`` (nor torch at module
level): everything else builds on it."""
