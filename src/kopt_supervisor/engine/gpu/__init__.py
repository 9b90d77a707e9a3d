"""GPU backends, the idle gate and its host-wide claims (docs/design.md §1, §6, §10). See docs/gpu-gate.md."""
