"""The claims as code: the C claims, the seed articles' (stated in docs/claims.md), and the F claims, the
frontier placements' papers of 2024–2026 (the `frontier` preset). Importing this package registers them all: every
module of this package is imported, and each registers its claims (`@claim("C17")`), so a new claim is
a new module here and nothing else. What the claims share registers nothing: the claim API (`base`), the
statistics (`statistics`), the grouping of runs (`grouping`), the decision rules (`decisions`) and the words of
their summaries (`prose`)."""
import importlib
import pkgutil

from normlab.report.figure import Figure, Series
from normlab.study.claims.base import CLAIMS, FAMILIES, FAILS, HOLDS, INCONCLUSIVE, Claim, Verdict

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")


def claim_number(claim_id: str) -> tuple[int, int]:
    """C7 → (0, 7), F2 → (1, 2): claims are listed by family, then by number (C10 after C9), wherever a list of
    them is shown."""
    return list(FAMILIES).index(claim_id[0]), int(claim_id[1:])


# every registered claim, by number: what presets, the CLI and the report list (a new claim module adds itself)
ORDER = sorted(CLAIMS, key=claim_number)
SEED_CLAIMS = [c for c in ORDER if c.startswith("C")]  # the standard preset's
FRONTIER_CLAIMS = [c for c in ORDER if CLAIMS.get(c).home == "frontier"]  # the frontier preset's (F1–F8)
RESIDUAL_CLAIMS = [c for c in ORDER if CLAIMS.get(c).home == "residual"]  # the residual preset's (F9–F13)

__all__ = ["CLAIMS", "FAILS", "FRONTIER_CLAIMS", "HOLDS", "INCONCLUSIVE", "ORDER",
           "RESIDUAL_CLAIMS", "SEED_CLAIMS", "Claim", "Figure", "Series", "Verdict", "claim_number"]
