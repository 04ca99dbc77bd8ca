"""What a study's verdicts cost: wall time per claim, per cell and per decisive verdict, read from a study's
ledger (the runs' own measured training times; nothing is re-run).

    python benchmarks/study_cost.py normlab-study [--json out.json]

A run needed by several claims is counted in full for each ("alone": what the claim would cost if run by
itself) and split evenly between them ("shared": the claims' shares add up to the study's training time).
A cell is one shape of run: scheme, depth, width and steps. The study's wall time is its first start to its
last finish; with W workers it is about the training time / W, plus measurements and verdicts.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from pathlib import Path

from normlab.study.claims import CLAIMS
from normlab.study.ledger import Ledger
from normlab.study.judge import compute_verdicts
from normlab.study.load import plan_of
from normlab.study.state import study_ids
from normlab.study.trained import judge_trained
from normlab.report.outcome import outcome_counts
from normlab.report.outcome import replicated
from normlab.study.reference import in_reference_runs
from normlab.study.plan import INIT_KEY, factor_overrides, plan_from_meta


def claim_runs(spec, ids: set[str], flats: dict[str, dict]) -> dict[str, set[str]]:
    """{claim: the registered run ids its runs (every init pass and seed) resolved to}; `flats`: each run's
    config, flattened (`RunRecord.flat`)."""
    out: dict[str, set[str]] = {}
    for claim_id in spec.claims:
        claim = CLAIMS.get(claim_id)()
        wanted = []
        for recipe in spec[claim_id].inits:
            wanted += [{INIT_KEY: recipe, **o} for o in claim.runs(spec.preset)]
        mine = set()
        for rid in ids:
            flat = flats[rid]
            if any(all(flat.get(k) == v for k, v in o.items()) and _is_base_elsewhere(flat, o, spec) for o in wanted):
                mine.add(rid)
        out[claim_id] = mine
    return out


def _is_base_elsewhere(flat: dict, overrides: dict, spec) -> bool:
    """The run matches the preset's base on every key the overrides do not set (seeds aside)."""
    return all(flat.get(k) == v for k, v in spec.preset.base.items() if k not in overrides)


def cell(flat: dict) -> str:
    return (f"{flat.get('model.scheme')} L{flat.get('model.n_layer')} d{flat.get('model.d_model')} "
            f"{flat.get('train.steps')} steps")


def record(preset: str, wall: float, runs: int, decisive: int, claims: int) -> None:
    import datetime
    import os

    from normlab.device import cpu_model
    from normlab.study.presets import MEASURED

    data = json.loads(MEASURED.read_text("utf-8")) if MEASURED.is_file() else {}
    data[preset] = {"wall_s": round(wall, 1), "runs": runs, "decisive": decisive, "claims": claims,
                    "machine": f"{os.cpu_count()}-core {cpu_model()}", "date": datetime.date.today().isoformat()}
    MEASURED.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", "utf-8")
    print(f"recorded in {MEASURED}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--design", type=Path, default=None, help="the same preset's design-seed study (or its "
                    "verdicts.json): the cost per replicated verdict (decisive, and the same on both seed sets)")
    ap.add_argument("--record", action="store_true", help="write the study's wall time into the preset's measured "
                    "cost (src/normlab/study/measured_cost.json), which its description quotes")
    args = ap.parse_args(argv)
    ledger = Ledger(args.study)
    meta = ledger.meta()
    spec = plan_from_meta(meta)
    ids = study_ids(spec, ledger, meta["study"]["run_ids"])
    # "did not train" in the study's one meaning (study/trained.py: below its line), as the verdicts count it
    records = {r.id: r for r in judge_trained(ledger.records(set(ids)), spec.lines)}
    flats = {rid: r.flat for rid, r in records.items()}  # an older ledger's rows in today's spelling (stored_config)
    rows = [r for r in ledger.rows() if r["id"] in set(ids)]
    started, finished = [r["started"] for r in rows if r["started"]], [r["finished"] for r in rows if r["finished"]]
    wall = max(finished) - min(started) if started and finished else 0.0
    by_claim = claim_runs(spec, set(records), flats)
    owners: dict[str, int] = defaultdict(int)
    for mine in by_claim.values():
        for rid in mine:
            owners[rid] += 1
    elapsed = {rid: r.elapsed_s or 0.0 for rid, r in records.items()}
    train_s = sum(elapsed.values())
    verdicts = {v.id: v for v in compute_verdicts(spec, ledger, ids)[0]}
    claims = []
    for claim_id, mine in by_claim.items():
        alone = sum(elapsed[r] for r in sorted(mine))  # in one order: a set's would move the last digit run to run
        shared = sum(elapsed[r] / owners[r] for r in sorted(mine))
        v = verdicts.get(claim_id)
        claims.append({"claim": claim_id, "verdict": v.outcome.text if v else None, "runs": len(mine), "alone_s": alone,
                       "shared_s": shared, "shared_wall_s": shared / train_s * wall if train_s else 0.0})
    cells: dict[str, dict] = defaultdict(lambda: {"runs": 0, "train_s": 0.0, "did_not_train": 0})
    for rid, r in records.items():
        c = cells[cell(flats[rid])]
        c["runs"] += 1
        c["train_s"] += elapsed[rid]
        c["did_not_train"] += r.did_not_train
    n_decisive = sum(v.outcome.decisive for v in verdicts.values())  # the one definition (report/outcome.py)
    ref = meta.get("reference_run")
    summary = {"study": str(args.study), "preset": spec.preset.name, "runs": len(records), "train_s": train_s,
               "wall_s": wall, "reference_run_s": (ref or {}).get("s"),
               "wall_reference_runs": in_reference_runs(wall, ref), "decisive": n_decisive, "claims": len(verdicts),
               "wall_s_per_decisive_verdict": wall / n_decisive if n_decisive else None,
               "outcomes": outcome_counts([v.to_dict() for v in verdicts.values()])}
    # each nuisance pass (`--vary`): its runs (those at the factor's other level) and their training time; its
    # wall time on W workers is about that / W
    passes = {}
    for factor in spec.spec.vary:
        other = factor_overrides(factor, spec.preset.config)
        mine = [rid for rid in records if all(flats[rid].get(k) == v for k, v in other.items())]
        passes[factor] = {"runs": len(mine), "train_s": sum(elapsed[r] for r in mine), "overrides": other}
        print(f"{factor} pass: {len(mine)} runs, {passes[factor]['train_s'] / 60:.1f} min of training")
    # `--vary init`: every training claim under the other recipe too, beyond the preset's own init pass
    if spec.spec.init_pass_override:
        chosen = plan_of(dataclasses.replace(spec.spec, init_pass_override=None), spec.claim_seeds, spec.builder)
        mine = sorted({r.id for r in spec.runs} - {r.id for r in chosen.runs} & set(records))
        passes["init"] = {"runs": len(mine), "train_s": sum(elapsed[r] for r in mine),
                          "overrides": {INIT_KEY: "the other recipe"}}
        print(f"init pass: {len(mine)} runs, {passes['init']['train_s'] / 60:.1f} min of training")
    summary["passes"] = passes
    if args.design:
        path = args.design / "verdicts.json" if args.design.is_dir() else args.design
        seen = {v["id"]: v for v in json.loads(path.read_text("utf-8"))["verdicts"]}
        # replicated: the one definition (report/outcome.replicated): decisive under every level measured, and
        # the same outcome on the design seeds
        same = [v.id for v in verdicts.values() if v.id in seen and replicated(v.to_dict(), seen[v.id])]
        summary.update({"replicated": len(same), "replicated_claims": same,
                        "wall_s_per_replicated_verdict": wall / len(same) if same else None})
        print(f"{len(same)} verdicts replicated (decisive, the same on the design seeds and under every level "
              "measured): " + (f"{wall / len(same):.0f} s of wall time per replicated verdict" if same else "none"))
    print(f"study {args.study} ({spec.preset.name}): {len(records)} runs, {train_s / 60:.1f} min of training, "
          f"{wall / 60:.1f} min wall; {n_decisive} of {len(verdicts)} verdicts decisive: "
          + (f"{wall / n_decisive:.0f} s of wall time per decisive verdict" if n_decisive else "none decisive"))
    print(f"\n{'claim':6} {'verdict':14} {'runs':>5} {'alone (s)':>10} {'shared (s)':>11} {'shared wall (s)':>16}")
    for c in claims:
        print(f"{c['claim']:6} {str(c['verdict']):14} {c['runs']:5d} {c['alone_s']:10.0f} {c['shared_s']:11.0f} "
              f"{c['shared_wall_s']:16.0f}")
    print(f"\n{'cell':34} {'runs':>5} {'train (s)':>10} {'s/run':>7} {'did not train':>14}")
    for name, c in sorted(cells.items(), key=lambda kv: -kv[1]["train_s"]):
        print(f"{name:34} {c['runs']:5d} {c['train_s']:10.0f} {c['train_s'] / c['runs']:7.1f} "
              f"{c['did_not_train']:14d}")
    if args.record:
        record(spec.preset.name, wall, len(records), n_decisive, len(verdicts))
    if args.json:
        args.json.write_text(json.dumps({**summary, "per_claim": claims, "per_cell": dict(cells),
                                         "decisive_claims": [v.id for v in verdicts.values()
                                                             if v.outcome.decisive]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
