"""The lists derived from the registries that are written down: what the commands' help lists (the schemes, the
normalizers, the presets, the Hugging Face families), kept in `listings.json` beside this file so that `--help`
answers without importing torch, which every registry needs; and, in a source checkout, the README's list of
normalizers and docs/schemes.md's table of them (`docs_lists`), so that a new normalizer is one class and this
command.

Why: `study`, `export`, `import-hf` and `bench --help` took 1.6–1.8 s on the 2-core machine, almost all of it
torch's import (benchmarks/cli_startup.py). Everything here is written from the registries (`python -m
normlab.cli.listings`), and `tests/test_cli.py` and `tests/test_docs.py` fail when it no longer says what they say.
"""
from __future__ import annotations

import functools
import json
import re
import textwrap
from importlib import resources
from pathlib import Path
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


# where each written list sits in its page: the README's sentence, and the normalizers' section of docs/schemes.md
# (its heading, table and the paragraph before the table)
README_NORMS = re.compile(r"\d+ normalizers: (?:`[\w-]+`, )*`[\w-]+`\.")
SCHEMES_NORMS = re.compile(r"## The \d+ normalizers\n\n(?:[^|\n][^\n]*\n)+\n(?:\|[^\n]*\n)+")


def docs_lists() -> dict[str, list[tuple[re.Pattern, str]]]:
    """Each page's lists as the registries give them now (imports torch): page → [(where, what)]. The table's
    parameters are read from a built module of each normalizer, so it says what the code has."""
    from normlab.nn.norms import NORMS, make_norm

    rows = []
    for name, cls in NORMS.items():
        params = [p for p, _ in make_norm(name, 4, bias=cls.has_bias).named_parameters()]
        kept = [p for p, _ in make_norm(name, 4, affine=False).named_parameters()]
        said = ", ".join(f"`{p}`" + (" (`norm_bias`)" if p == "bias" else "") for p in params) or "none"
        options = ", ".join(f"`norm_options.{k}` ({v:g})" for k, v in cls.OPTIONS.items()) or "—"
        paper = f" ({cls.paper})" if cls.paper else ""
        rows.append(f"| `{name}` | {cls.formula}{paper} | {said} | {', '.join(f'`{p}`' for p in kept) or 'none'} "
                    f"| {options} |")
    intro = textwrap.fill(
        "Written from the registry (`python -m normlab.cli.listings`): each one's formula and paper, its parameters "
        "as built (`bias` with `model.norm_bias = true`), those that stay learnable with `model.norm_affine = false`, "
        "and its `model.norm_options` with their defaults. ε is `model.norm_eps`.", 117, break_on_hyphens=False,
        break_long_words=False)
    table = (f"## The {len(NORMS)} normalizers\n\n{intro}\n\n"
             "| normalizer | formula | parameters | with `norm_affine = false` | options |\n|---|---|---|---|---|\n"
             + "\n".join(rows) + "\n")
    readme = f"{len(NORMS)} normalizers: " + ", ".join(f"`{n}`" for n in NORMS) + "."
    return {"README.md": [(README_NORMS, readme)], "docs/schemes.md": [(SCHEMES_NORMS, table)]}


def written(text: str, lists: list[tuple[re.Pattern, str]], page: str = "page") -> str:
    """`text` with each list in its place rewritten; a page where a list's place is not found exactly once is
    refused, naming it."""
    for where, what in lists:
        found = len(where.findall(text))
        if found != 1:
            raise ValueError(f"{page}: the place of a written list ({where.pattern!r}) is found {found} times; "
                             "valid: exactly once")
        text = where.sub(lambda _: what, text)
    return text


def write_docs(root: Path) -> list[Path]:
    """Write `docs_lists` into the pages of the source checkout at `root`."""
    out = []
    for page, lists in docs_lists().items():
        path = root / page
        path.write_text(written(path.read_text("utf-8"), lists, page), "utf-8")
        out.append(path)
    return out


if __name__ == "__main__":
    path = resources.files("normlab.cli").joinpath(FILE)
    path.write_text(json.dumps(from_registries(), indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {path}")
    checkout = Path(__file__).resolve().parents[3]  # src/normlab/cli/listings.py → the checkout, if it is one
    if (checkout / "pyproject.toml").is_file() and (checkout / "docs" / "schemes.md").is_file():
        print("wrote " + ", ".join(str(p) for p in write_docs(checkout)))
