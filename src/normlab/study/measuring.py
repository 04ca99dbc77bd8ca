"""The claims' measurements that are not training runs (timings, memory, constants, causality: `Claim.measure`):
taken once per study, once its runs are settled (a quiet machine), by one process at a time; and whether those
stored are current (`Claim.measure_key`), which a study's completion needs (state.py).
"""
from __future__ import annotations

import time

from normlab.bench.timing import steady_allocator
from normlab.study.claims import CLAIMS, Claim
from normlab.study.ledger import Ledger
from normlab.study.plan import StudyPlan

MEASURE_LOCK = ".measuring.lock"  # in the study directory: held by the one process measuring


def measure_claims(plan: StudyPlan, ledger: Ledger, measure: bool = True) -> bool:
    """Whether every claim that measures has its current measurement stored: as the ledger holds them, or (with
    `measure`: the study's runs are settled) after measuring each claim whose measurement is missing or stale.

    One process measures at a time: a second `normlab study` on the directory waits on a lock, then finds the
    claims measured. Why: both used to measure at once, timing each other's load, and on 2 cores their threads
    oversubscribed the machine (C16's 98 models took minutes each instead of 27 s, past a test's 10-minute limit).
    A measurement that does not carry its claim's key (`Claim.measure_key`) is refused as it is taken: stored, it
    would read as stale, and the study would measure it again on every run and never be final.
    """
    if not measure:
        return {c for c in plan.claims if _measures(c)} <= ledger.measured() - stale_measurements(plan, ledger)
    import fcntl

    steady_allocator()  # as `normlab bench`: freed memory stays warm, so no candidate pays another's page faults
    with open(ledger.dir / MEASURE_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when the process dies
        have = ledger.measured() - stale_measurements(plan, ledger)
        for claim_id in plan.claims:
            if claim_id not in have:  # None is stored too: it marks the claim measured (for `completion`)
                claim, start = CLAIMS.get(claim_id)(), time.time()
                value, key = claim.measure(plan.preset), claim.measure_key(plan.preset)
                if value is not None and key is not None and value.get("key") != key:
                    raise ValueError(f"claim {claim_id}'s measurement carries key {value.get('key')!r}, not its "
                                     f"measure_key {key!r}: Claim.measure must store the key it is measured under")
                ledger.set_measurement(claim_id, value)
                ledger.add_quiet_span(f"measure {claim_id}", start, time.time())
    return True  # every claim current: each was so under the lock, or was measured now with its key


def stale_measurements(plan: StudyPlan, ledger: Ledger) -> set[str]:
    """Claims whose stored measurement carries another key than the claim gives now (`Claim.measure_key`)."""
    stored = ledger.measurements()
    out = set()
    for claim_id in plan.claims:
        key = CLAIMS.get(claim_id)().measure_key(plan.preset) if claim_id in stored else None
        if key is not None and stored[claim_id].get("key") != key:
            out.add(claim_id)
    return out


def _measures(claim_id: str) -> bool:
    """Whether a claim has a non-training measurement (overrides `Claim.measure`)."""
    return CLAIMS.get(claim_id).measure is not Claim.measure
