"""The claims C1–C16 as code (see ../shared/spec/claims.md). Importing this package registers them all."""
from normlab.study.claims import layers, quality, stability, static  # noqa: F401  (registration)
from normlab.study.claims.base import CLAIMS, FAILS, HOLDS, INCONCLUSIVE, Claim, Figure, Series, Verdict

ORDER = [f"C{i}" for i in range(1, 17)]

__all__ = ["CLAIMS", "FAILS", "HOLDS", "INCONCLUSIVE", "ORDER", "Claim", "Figure", "Series", "Verdict"]
