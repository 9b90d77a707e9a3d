"""kopt.toml: the schema, its defaults, and validation with errors that name the key at fault.

Each section is a frozen dataclass; the field's type and default are the schema. Loading
walks the TOML tables, rejects unknown keys (with a "did you mean" hint: a typo must never
silently change a run), checks every value's type and range, and parses every expression
once so that a bad one is reported at `kopt init`, not hours into a run.

Pure: reads a file or a string, returns a `Config`. No side effects.

Modules: sections (the dataclasses: the schema; the agent presets), toml_io (TOML to a
Config, unknown keys and types; a Config back to TOML, the frozen copy), validate (the
values' rules).
"""

from kopt_supervisor.engine.config.sections import (
    FORMATS,
    AdapterConfig,
    Config,
    DecideConfig,
    FormatConfig,
    GpuConfig,
    ParallelConfig,
    ProfileConfig,
    ProposeConfig,
    RooflineConfig,
    StopConfig,
    TargetConfig,
    TuneConfig,
)
from kopt_supervisor.engine.config.toml_io import (
    _build as _build,  # engine.api.runs: a Config from its own table
)
from kopt_supervisor.engine.config.toml_io import dumps, load, loads
from kopt_supervisor.engine.config.validate import decide_problems, validate

__all__ = [
    "FORMATS",
    "AdapterConfig",
    "Config",
    "DecideConfig",
    "FormatConfig",
    "GpuConfig",
    "ParallelConfig",
    "ProfileConfig",
    "ProposeConfig",
    "RooflineConfig",
    "StopConfig",
    "TargetConfig",
    "TuneConfig",
    "decide_problems",
    "dumps",
    "load",
    "loads",
    "validate",
]
