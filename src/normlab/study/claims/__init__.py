"""The claims C1–C16 as code (see ../shared/spec/claims.md). Importing this package registers them all: every
module of this package is imported, and each registers its claims (`@claim("C17")`), so a new claim is
a new module here and nothing else."""
import importlib
import pkgutil

from normlab.study.claims.base import CLAIMS, FAILS, HOLDS, INCONCLUSIVE, Claim, Figure, Series, Verdict

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base"):
    importlib.import_module(f"{__name__}.{_module}")



def claim_number(claim_id: str) -> int:
    """C7 → 7: claims are listed by number (C10 after C9), wherever a list of them is shown."""
    return int(claim_id.lstrip("C"))


# every registered claim, by number: what presets, the CLI and the report list (a new claim module adds itself)
ORDER = sorted(CLAIMS, key=claim_number)

__all__ = ["CLAIMS", "FAILS", "HOLDS", "INCONCLUSIVE", "ORDER", "Claim", "Figure", "Series", "Verdict",
           "claim_number"]
