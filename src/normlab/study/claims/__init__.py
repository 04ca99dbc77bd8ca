"""The claims C1–C16 as code (see ../shared/spec/claims.md). Importing this package registers them all."""
from normlab.study.claims import layers, quality, stability, static  # noqa: F401  (registration)
from normlab.study.claims.base import CLAIMS, FAILS, HOLDS, INCONCLUSIVE, Claim, Figure, Series, Verdict

# every registered claim, by number: what presets, the CLI and the report list (a new claim module adds itself)
ORDER = sorted(CLAIMS, key=lambda cid: int(cid.lstrip("C")))

__all__ = ["CLAIMS", "FAILS", "HOLDS", "INCONCLUSIVE", "ORDER", "Claim", "Figure", "Series", "Verdict"]
