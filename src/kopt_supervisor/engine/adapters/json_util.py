"""Finding the JSON document in a bench's output (a file, or stdout with log lines around).

Pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kopt_supervisor.engine.adapters.model import AdapterError


def load_json(text: str, source: str, *, key: str) -> dict[str, Any]:
    """The first JSON object in `text` that has `key` (the whole text when it is one; else the
    first `{` at the start of a line that decodes to such an object). NaN and Infinity, which
    Google Benchmark writes, are read as floats."""
    lead = len(text) - len(text.lstrip())
    starts = [lead] if text[lead : lead + 1] == "{" else []
    starts += [m.start() + 1 for m in re.finditer(r"\n\{", text) if m.start() + 1 != lead]
    decoder = json.JSONDecoder()
    first_error = ""
    for start in starts:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"{exc.msg} at line {exc.lineno}"
            continue
        if isinstance(obj, dict) and key in obj:
            return obj
    why = f" ({first_error})" if first_error else ""
    raise AdapterError(f"{source}: no JSON object with {key!r} found{why}")
