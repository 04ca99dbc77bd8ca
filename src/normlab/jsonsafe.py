"""JSON has no NaN or infinity: a diverged loss is written as null, not lost and not invalid JSON."""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def json_safe(value: Any) -> Any:
    """NaN and ±inf become None; tuples become lists; dict keys become strings; numpy/torch scalars plain."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):  # a dict, or a mapping such as a config `Change`
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        return json_safe(value.item())
    return value


def write_json(data: Any, path: str | Path | None = None) -> str:
    """`data` as indented JSON text (JSON-safe, one trailing newline), written to `path` where given: what a
    benchmark prints and commits under benchmarks/results/."""
    text = json.dumps(json_safe(data), indent=2) + "\n"
    if path is not None:
        Path(path).write_text(text, "utf-8")
    return text
