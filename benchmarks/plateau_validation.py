"""Would the runs the plateau stop ended have trained by their budget? Continue each one and see.

    python benchmarks/plateau_validation.py normlab-study [--workers 2]

A study censors every run `train.plateau_stop` ended while still on the unigram plateau: it is neither a
failure nor a loss in any verdict, since whether it would have trained is unknown. This makes it known. Each
such run's directory is copied to STUDY/plateau_validation/<id> (the study's own run is left as it is), its
config's `train.plateau_stop` set to 'off', and the run resumed from the checkpoint the stop wrote, to its full
budget, bit for bit as the uninterrupted run would have gone on. STUDY/plateau_validation.json then holds each
run's outcome at its budget, and the study's ledger reads it (`study/validation.py`): a run that stayed on the
plateau failed to train, one that left it trained, with the val loss it reached (`normlab report STUDY` judges
again with them). Copy the JSON beside the study's committed verdicts.json: the README's tables rest on it.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tomllib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import tomli_w


def continue_run(source: str, target: str) -> dict:
    """Copy a stopped run, lift its plateau stop and train it to its budget; its outcome there."""
    import torch

    from normlab.rundir import RunDir
    from normlab.train.loop import train

    torch.set_num_threads(1)  # as the study trained it (train.threads = 1)
    src, dst = Path(source), Path(target)
    if not (dst / "config.toml").is_file():
        shutil.copytree(src, dst / ".partial", dirs_exist_ok=True)
        config = tomllib.loads((dst / ".partial" / "config.toml").read_text("utf-8"))
        config["train"]["plateau_stop"] = "off"
        (dst / ".partial" / "config.toml").write_text(tomli_w.dumps(config), "utf-8")
        (dst / ".partial" / "status.json").unlink(missing_ok=True)  # completed at the stop: resume from there
        for item in (dst / ".partial").iterdir():
            shutil.move(str(item), dst / item.name)
        (dst / ".partial").rmdir()
    status = RunDir(dst).read_status() or {}
    if status.get("status") not in ("completed", "diverged"):
        train(RunDir(dst).read_config(), str(dst))
        status = RunDir(dst).read_status() or {}
    # "trained" in the study's one meaning (study/trained.py): below its line, not merely off the plateau
    from normlab.study.trained import has_trained, line_of

    line = line_of(RunDir(dst).read_config())
    return {"trained": has_trained(status.get("status"), status.get("val_loss"), line), "line": line,
            "status": status.get("status"), "outcome": status.get("outcome"), "val_loss": status.get("val_loss"),
            "step": status.get("step")}


def write_outcomes(study: Path, results: dict[str, dict]) -> dict:
    """Add these runs' outcomes to STUDY/plateau_validation.json beside those an earlier validation wrote. The
    ledger applies the file, so the runs in it are no longer censored and are not continued again: a study that
    grew (a new pass, a seed round) is validated for its new stopped runs only, and the earlier ones must stay."""
    from normlab.study.validation import VALIDATION

    path = study / VALIDATION
    runs = {**(json.loads(path.read_text("utf-8"))["runs"] if path.is_file() else {}), **results}
    data = {"runs": runs, "continued": len(runs), "trained": sorted(rid for rid, r in runs.items() if r["trained"]),
            "rule": "a run the plateau stop ended, continued from its stop's checkpoint to its full budget with "
                    "train.plateau_stop = 'off'; trained: it completed below the study's trained line "
                    "(study/trained.py: halfway from the corpus's unigram to its bigram cross-entropy)"}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", "utf-8")
    return data


def main(argv: list[str] | None = None) -> int:
    from normlab.study.ledger import Ledger
    from normlab.study.validation import VALIDATION

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    ledger = Ledger(args.study)
    stopped = [r for r in ledger.records() if r.censored]
    out = args.study / "plateau_validation"
    jobs = {r.id: (str(ledger.run_dir(r.id)), str(out / r.id)) for r in stopped}
    print(f"{len(jobs)} runs the plateau stop ended that no earlier validation continued: continuing each to its "
          "budget")
    with ProcessPoolExecutor(args.workers) as pool:
        futures = {rid: pool.submit(continue_run, *paths) for rid, paths in jobs.items()}
        results = {rid: f.result() for rid, f in futures.items()}
    data = write_outcomes(args.study, results)
    new = sorted(rid for rid, r in results.items() if r["trained"])
    print(f"{len(new)} of {len(results)} would have trained by their budget: {', '.join(new) or 'none'}; "
          f"{len(data['trained'])} of {data['continued']} in all → {args.study / VALIDATION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
