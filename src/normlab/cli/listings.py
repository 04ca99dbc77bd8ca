"""What the commands' help lists (the schemes, the normalizers, the presets, the Hugging Face families), kept in
`listings.json` beside this file so that `--help` answers without importing torch, which every registry needs.

Why: `study`, `export`, `import-hf` and `bench --help` took 1.6–1.8 s on the 2-core machine, almost all of it
torch's import (benchmarks/cli_startup.py). The file is written from the registries (`python -m
normlab.cli.listings`), and `tests/test_cli.py` fails when it no longer says what they say.
"""
from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

FILE = "listings.json"


@functools.cache
def listing() -> dict[str, Any]:
    """The help's lists as last written from the registries."""
    return json.loads(resources.files("normlab.cli").joinpath(FILE).read_text("utf-8"))


def from_registries() -> dict[str, Any]:
    """The lists as the registries give them now (imports torch)."""
    from normlab.hf.families import exportable_text, importable_text
    from normlab.nn.norms import NORMS
    from normlab.nn.schemes import SCHEMES
    from normlab.study.presets import PRESETS

    return {"schemes": list(SCHEMES), "norms": list(NORMS),
            "presets": [[p.name, p.summary] for p in PRESETS.values()],
            "importable": importable_text(), "exportable": exportable_text()}


if __name__ == "__main__":
    path = resources.files("normlab.cli").joinpath(FILE)
    path.write_text(json.dumps(from_registries(), indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {path}")
