"""Decision Transformer for Atari with DAPO's advantage weighting.

Not built yet: tracked by the dapo_dt issue (#6). The package exists so the layout is fixed."""
