"""The runs of one configuration over seeds, as a claim reads them: which records it selects (`select`, `group`,
`from_runs`), what they say (`Group`: the losses of the runs that trained, the runs that did not, counted apart,
the runs censored by the plateau stop, apart again) and how that reads in a verdict (`group_record`, `failures`).

A configuration is named as a claim's runs are (`config.Change`): each field by its name or dotted, as a run's change
gives it (`group(records, **change)`) or by hand (`group(records, scheme="pre", lr=1e-3)`)."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from normlab.config import Change
from normlab.study.claims.prose import setting_text
from normlab.study.claims.statistics import CONFIDENCE, t_interval, wilson_interval
from normlab.study.records import RunRecord, flatten



@dataclass
class Group:
    """Final val losses of one configuration over seeds, of the runs that trained; the runs that diverged or
    failed to train (never left the unigram plateau) are counted apart, as a rate, never inside the mean."""

    losses: list[float]
    n_runs: int
    n_diverged: int
    n_failed_to_train: int = 0
    where: dict[str, Any] = field(default_factory=dict)  # the configuration, as `group` selected it (dotted keys)
    seeds: list[int] = field(default_factory=list)  # the seed of each loss in `losses` (empty: not paired)
    outcomes: dict[int, bool] = field(default_factory=dict)  # seed -> trained, over all its runs
    # runs `train.plateau_stop` stopped on the plateau before their budget: censored, not failures (whether they
    # would have trained is unknown), so they are in none of the counts above and none of the pairs
    n_censored: int = 0

    @property
    def by_seed(self) -> dict[int, float]:
        """{seed: final val loss} of the runs that trained (empty where the group carries no seeds)."""
        return dict(zip(self.seeds, self.losses)) if len(self.seeds) == len(self.losses) else {}

    @property
    def n_failed(self) -> int:
        """Runs that did not train: diverged or failed to train."""
        return self.n_diverged + self.n_failed_to_train

    @property
    def failure_rate(self) -> float | None:
        return self.n_failed / self.n_runs if self.n_runs else None

    @property
    def failure_interval(self) -> tuple[float, float] | None:
        """95 % Wilson score interval of the failure rate (meaningful at any n, including 0 or n failures)."""
        return wilson_interval(self.n_failed, self.n_runs)

    @property
    def two_mode(self) -> bool:
        """Some seeds trained and some did not: a mean over the ones that trained describes half the story."""
        return 0 < self.n_failed < self.n_runs

    @property
    def n(self) -> int:
        return len(self.losses)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.losses) if self.losses else None

    @property
    def sd(self) -> float | None:
        return statistics.stdev(self.losses) if len(self.losses) >= 2 else None

    @property
    def mean_interval(self) -> list[float] | None:
        """95 % t interval of the mean val loss of the runs that trained (None below 2 of them): a description,
        at the single-look level whatever level the claim decides at."""
        return t_interval(self.losses, CONFIDENCE)


def config_keys(where: dict[str, Any]) -> dict[str, Any]:
    """A configuration as a record matches it: its fields as a `Change` names them (a misspelt field is refused),
    dotted, and a table value (`model.norm_options`) by its keys, as a flattened config holds it."""
    return flatten(dict(Change(where)))


def select(records: Iterable[RunRecord], strict: bool = True, **where: Any) -> list[RunRecord]:
    """Records with these config values (and, strict, the base config everywhere else)."""
    wanted = config_keys(where)
    return [r for r in records if r.matches(wanted, strict)]


def from_runs(records: Iterable[RunRecord], overrides: list[dict[str, Any]]) -> list[RunRecord]:
    """Records of exactly these runs (a claim's `runs()` overrides, any seed)."""
    wheres = [config_keys(o) for o in overrides]
    return [r for r in records if any(r.matches(w) for w in wheres)]


def group(records: Iterable[RunRecord], strict: bool = True, **where: Any) -> Group:
    """The runs of one configuration; a run stopped on the plateau before its budget is censored: counted apart
    (`n_censored`), neither a failure nor a loss."""
    where = config_keys(where)
    selected = [r for r in records if r.matches(where, strict)]
    chosen = [r for r in selected if not r.censored]
    trained = [r for r in chosen if r.status == "completed" and r.val_loss is not None and math.isfinite(r.val_loss)]
    ids = {r.id for r in trained}
    return Group([r.val_loss for r in trained], len(chosen), sum(r.diverged for r in chosen),
                 sum(r.failed_to_train for r in chosen), where, seeds=[r.seed for r in trained],
                 outcomes={r.seed: r.id in ids for r in chosen if r.id in ids or r.did_not_train},
                 n_censored=len(selected) - len(chosen))


def n_seeds(records: Iterable[RunRecord]) -> int:
    return len({r.seed for r in records})


def group_record(g: Group) -> dict[str, Any]:
    """One configuration over seeds: the loss of the runs that trained (mean, sd, 95 % t interval), and the
    runs that did not, as a rate with its 95 % Wilson interval; `two_mode` when some seeds trained and some not."""
    interval = g.failure_interval
    return {"setting": setting_text(g.where), "mean_val_loss": g.mean, "sd": g.sd, "mean_ci95": g.mean_interval,
            "n_runs": g.n_runs,
            "n_trained": g.n, "n_diverged": g.n_diverged, "n_failed_to_train": g.n_failed_to_train,
            "did_not_train_rate": g.failure_rate, "did_not_train_ci95": list(interval) if interval else None,
            "two_mode": g.two_mode, "n_censored": g.n_censored}


def failures(g: Group) -> str:
    """`0/2 did not train`, or `1 diverged + 1 failed to train of 2`, and the runs censored by the plateau stop."""
    censored = f"; {g.n_censored} stopped on the plateau, censored" if g.n_censored else ""
    if not g.n_failed:
        return f"0/{g.n_runs} did not train{censored}"
    parts = [f"{n} {what}" for n, what in ((g.n_diverged, "diverged"), (g.n_failed_to_train, "failed to train")) if n]
    return f"{' + '.join(parts)} of {g.n_runs}{censored}"
