"""A study: a base config, the claims to test (each adds the runs it needs), axes, and seeds.

It expands into runs, each identified by the hash of its resolved config, so a run
needed by two claims is trained once.
"""
from __future__ import annotations

import functools
import json
import tomllib
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.config import ConfigError, RunConfig, apply_override, check_given, derive, upgrade_overrides
from normlab.data.corpus import corpus_tokenizer
from normlab.study.trained import corpus_key, corpus_lines
from normlab.rundir.load import with_vocab
from normlab.study.claims import CLAIMS, FRONTIER_CLAIMS, SEED_CLAIMS
from normlab.study.records import flatten


@dataclass
class Preset:
    """The settings a study runs at: what its claims share here, and what it changes of each claim's own knobs
    (`knobs`). A claim reads both from here, never from its own constants."""

    name: str
    description: str
    base: dict[str, Any]  # dotted overrides on the RunConfig defaults; read typed as `config`
    seeds: list[int]
    claims: list[str]
    lrs: list[float]  # the learning-rate sweep (C1, C11, C14)
    warmup: int  # the "with warmup" length; "without" is 0
    lr_fixed: float  # the lr of the fixed-lr comparisons (C1's verdict, C4, C6, C13, ...)
    depths: list[int]  # the depth sweep (C2–C6)
    # one line for `normlab study --help`: what it runs and where (its cost is the description's, measured)
    summary: str = ""
    # the lr sweep's arm without warmup starts at this lr (C1's figure, C11's limit without warmup): below it every
    # scheme trained without warmup in the standard run of 2026-11-25 (Post-LN's limit was 3e-3); the arm with
    # warmup keeps the whole grid, where C7 tunes (under GPT-2's init Post-LN's best lr was 1e-3)
    no_warmup_from: float = 0.0
    robust_threads: int = 2  # the robustness pass reruns a claim's runs at this thread count (base: 1)
    # judge each claim under its paper's init recipe (`Claim.init`, set per run as model.init); False: every claim
    # under the base's init (studies registered before recipes existed are re-rendered that way)
    paper_inits: bool = False
    # which claims the study also judges under the other init recipe (`init-dependent` marks): "none"; "chosen":
    # those whose knob `init_pass` is on (a CPU preset's choice: a pass doubles a claim's training, so only the
    # claims where the init is the question, and the cheap ones); "all": every training claim
    init_pass: str = "none"
    # the depth cell: overrides on the base where the depth claims (C5–C7, their knob `in_cell`) are measured,
    # deeper and longer than the base, because at 4 layers × 300 steps the effects C5–C7 name are too small to see;
    # empty: C5 and C6 at the deepest depth of the sweep, C7 at the base depth, each at the base budget
    depth_cell: dict[str, Any] = field(default_factory=dict)
    # sequential seed rounds: the seeds a claim has at each look, cumulative, the first = len(seeds); [] or one
    # entry: every claim looks once. A claim whose knob `rounds` is on and whose verdict is inconclusive with an
    # interval that straddles its boundary gets the next round's seeds (its runs already trained are reused), and
    # every look of such a claim decides at its share of α (claims.statistics.SPENDING), whether or not it goes on
    seed_rounds: list[int] = field(default_factory=list)
    # what the preset changes of its claims' own knobs, by claim: {"C14": {"stress_lrs": [0.3, 0.5]}}; each claim
    # declares its knobs and their defaults beside it (`Claim.Knobs`) and reads them with `claim.knobs(preset)`
    knobs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self):
        if self.init_pass not in INIT_PASSES:
            raise ConfigError(f"preset {self.name!r}: init_pass {self.init_pass!r} is not one of "
                              f"{', '.join(INIT_PASSES)}")
        for cid, values in self.knobs.items():
            CLAIMS.get(cid).knobs_from(values)  # an unknown claim or knob: an error naming the valid ones

    @property
    def config(self) -> RunConfig:
        """The base as a validated RunConfig (the defaults with `base` set, at the preset's first seed: the study's
        base run): where a claim reads the base's settings (`preset.config.train.steps`), typed and with the
        defaults the overlay leaves out. The overlay itself is what a run's config and id are derived from
        (`build_config`). Validated when first read, once per base per process (`load_study` reads it first, so a
        bad key or value in a study's base is an error before anything runs)."""
        return _base_config(json.dumps({**self.base, "train.seed": self.seeds[0]}, sort_keys=True))

    @property
    def depth(self) -> int:
        return self.config.model.n_layer


@functools.lru_cache(maxsize=64)
def _base_config(base_json: str) -> RunConfig:
    return derive({}, json.loads(base_json))


INIT_PASSES = ("none", "chosen", "all")  # `Preset.init_pass`


def claims_choosing(knob: str) -> list[str]:
    """The seed claims whose own `Knobs` turn a membership knob on by default (`rounds`, `init_pass`): what a
    preset that keeps the claims' choice runs, as its description names them."""
    return [c for c in SEED_CLAIMS if getattr(CLAIMS.get(c).Knobs(), knob)]


# Seeds below HELD_OUT are the design seeds: rules, grids and presets are built and debugged on them (`--seeds
# 0,1,2,3,4`). The presets users run start at HELD_OUT, seeds no rule was designed on, and a seed round numbers on
# from there. Once held-out verdicts have been seen, a rule change moves HELD_OUT to fresh seeds (CHANGELOG.md says
# so) and the seeds before it join the design seeds, so a published verdict is always one its rule never saw
# (tests/study/test_seeds.py holds the presets to this; verdicts.json records the rules' fingerprint, study/rules.py).
# (1000–1004 were seen under earlier rules: CHANGELOG.md, 2026-11-28)
HELD_OUT = 2000
DESIGN_SEEDS = range(0, HELD_OUT)
HELD_OUT_SEEDS = [HELD_OUT + i for i in range(5)]

QUICK_BASE = {
    "model.block_size": 64, "model.n_layer": 4, "model.n_head": 4, "model.d_model": 64,
    # Xiong et al. 2020 (arXiv 2002.04745) §4.1 and §3.2: the fairseq Transformer's init (Xavier linears, no residual
    # scaling, N(0, d^-½) embeddings scaled by √d). GPT-2's 1/√(2L) scaling of the residual projections exists to
    # cancel the depth effects C1–C6 are about (it makes the last layer's gradient independent of L), so a claim
    # is judged under its paper's recipe (`Claim.init`, which sets model.init per claim) and, with the init pass,
    # re-measured under the other; DeepNorm sets its own β
    "model.init": "xiong",
    "train.batch_size": 12, "train.steps": 300, "train.schedule": "cosine", "train.min_lr": 0.0,
    "train.eval_interval": 100, "train.eval_batches": 10, "train.ckpt_interval": 100, "train.log_interval": 10,
    "train.device": "cpu", "diagnostics.interval": 100, "diagnostics.layer_skip": True,
    "train.threads": 1,  # pinned: a run's numerics must not depend on how many cores the machine has
    # a run still on the unigram plateau at half its budget stops there, failed to train (config.py says why ½)
    "train.plateau_stop": 0.5,
}
# a grid that reaches down to 3e-4 with 5 points, so that no scheme's best or limit sits at an edge by construction
LRS = [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
# C8 on a CPU: 32 narrow layers for 600 steps, where Pre-LN trains in most seeds, so DeepNorm's slow start can be
# told from failure (at 100 layers × 200 steps, 4 of 5 DeepNorm and 1 of 5 Pre-LN runs were still on the unigram
# plateau: the budget, not the scheme, decided). 32, not the 48 tried before: the bottom of the
# 32–64 range, two thirds of the cost; no layer-skip ablation (32 extra evaluations per run). Batches of 8 × 32
# tokens (the CPU presets' context; set here too, so that C8's cell is the same under a base with 64): a 32-layer
# Pre-LN step takes 0.68× the time of one with 64 (benchmarks/cpu_step_costs.py), and the claim is about depth
DEEP_CPU = {"model.d_model": 32, "model.n_head": 2, "model.block_size": 32, "train.batch_size": 8, "train.steps": 600,
            "diagnostics.layer_skip": False, "diagnostics.interval": 600}
# C5 and C6 on a CPU: Pre-LN at 12 layers × 1,000 steps, the base's width and batch (the cell differs from the
# base only in the two things the claims are about: depth and training length). The standard run of 2026-11-25 at
# 32 tokens spent 249 s of its training on the cell's 5 runs (9 %; 581 s at 64 tokens).
# C7 stays at the base depth here: its lr sweep in the cell (2 schemes × 5 lrs × 5 seeds = 50 such runs, about
# 40 min on 2 workers) does not fit the preset's 30 minutes; the `full` preset measures C7 in its cell
DEPTH_CELL = {"model.n_layer": 12, "train.steps": 1000, "train.eval_interval": 250, "train.ckpt_interval": 250,
              "diagnostics.interval": 250, "diagnostics.layer_skip": True}  # C6 reads the layer-skip profile
# The CPU presets (standard, quick) train on 32 tokens of context, not the base's 64, with twice the eval batches
# (the same 7,680 val tokens per evaluation): a 4-layer step takes 0.55x the time and a 12-layer one 0.59x
# (benchmarks/cpu_step_costs.py, interleaved on one core; 0.54–0.62x over four runs of it), which is what brings the standard preset under 30
# minutes on 2 cores without dropping a claim, a seed or a depth. No claim of the study is about context (they are
# about depth, placement, lr and warmup), and the batch keeps its 12 sequences. deep, full and frontier keep 64
CPU_CONTEXT = {"model.block_size": 32, "train.eval_batches": 20}
MEASURED = Path(__file__).with_name("measured_cost.json")  # written by benchmarks/study_cost.py --record


def measured_cost(preset: str) -> str:
    """The preset's cost as its last full run measured it (benchmarks/study_cost.py --record), never typed in."""
    try:
        m = json.loads(MEASURED.read_text("utf-8")).get(preset)
    except (OSError, ValueError):
        m = None
    if not m:
        return "not yet timed"
    return (f"{m['wall_s'] / 60:.1f} min wall on a {m['machine']} at its last run ({m['date']}: {m['runs']} runs, "
            f"{m['decisive']} of {m['claims']} verdicts decisive)")

PRESETS: dict[str, Preset] = {
    "standard": Preset(
        name="standard", summary="every claim on a 2-core CPU (`make run`)",
        description=f"all {len(SEED_CLAIMS)} claims on a 2-core CPU: 4-layer, 64-wide char models, 32 tokens of "
                    f"context, 300 steps, 5 held-out seeds ({HELD_OUT}–{HELD_OUT + 4}), depths 2–16, C5 and C6 at 12 "
                    "layers × 1,000 steps, a second round to 10 seeds where the evidence leans one way but the test "
                    f"cannot yet reach its level ({', '.join(claims_choosing('rounds'))}: the power plan, "
                    "`normlab study --plan`), 5 learning rates 3e-4–3e-2 with warmup, 4 from 1e-3 "
                    "without (C14: Peri-LN and Pre-LN at 0.3–1 without warmup), DeepNorm vs Post-/Pre-LN at 32 "
                    "narrow layers × 600 steps, runs still on the plateau at half their budget stopped, each claim "
                    f"under its paper's init and {', '.join(claims_choosing('init_pass'))} also under the other; "
                    + measured_cost("standard"),
        # no layer-skip ablation outside the depth cell: only C6 reads it (one evaluation per layer per run)
        base={**QUICK_BASE, **CPU_CONTEXT, "diagnostics.layer_skip": False}, seeds=HELD_OUT_SEEDS,
        claims=list(SEED_CLAIMS),
        lrs=LRS, no_warmup_from=1e-3, warmup=50, lr_fixed=3e-3, depths=[2, 4, 8, 16], paper_inits=True,
        init_pass="chosen", depth_cell=DEPTH_CELL,
        # two looks (5, then 10 seeds: the cap) for the claims whose knob `rounds` is on: those whose evidence is a
        # failure split, whose exact test cannot reach Holm's level at 5 seeds (C1, C4, C8, C11, C14: study/power.py;
        # C4's round adds only its two end depths, C11's reuses C1's runs), and those with the cheapest second round
        # (C10, C13, C15). The other claims' tests are continuous and reach their level at 5 seeds: they look once
        seed_rounds=[5, 10],
        knobs={"C7": {"in_cell": False}, "C8": {"depths": [32], "base": DEEP_CPU}, "C10": {"repeats": 9},
               # C14's lrs: in the standard runs of 2026-11-25 at 64 tokens Pre-LN and Peri-LN both trained at 0.03,
               # 0.1 and 0.3 and both failed at 1 in every seed, so a limit that tells them apart lies between 0.3
               # and 1 (at 32 tokens too: Peri-LN's limit was 0.5, Pre-LN's 0.3)
               "C14": {"stress_lrs": [0.3, 0.5, 0.7, 1.0]}},
    ),
    "quick": Preset(
        name="quick", summary="the standard preset without C8, C14, the init pass and the seed rounds",
        description="the standard preset without C8 and C14 (very deep models, Peri-LN in both sweeps) and "
                    "without its init pass; " + measured_cost("quick"),
        # 5 seeds: a 95 % t interval at 2 seeds is ±4.3 standard errors, and a two-mode outcome (Post-LN
        # stuck or not) needs a rate, which 2 seeds cannot give
        base={**QUICK_BASE, **CPU_CONTEXT}, seeds=HELD_OUT_SEEDS,
        # C8 (very deep models) and C14 (Peri-LN in both sweeps) are the standard preset's
        claims=[c for c in SEED_CLAIMS if c not in ("C8", "C14")],
        lrs=LRS, no_warmup_from=1e-3, warmup=50, lr_fixed=3e-3, depths=[2, 4, 8, 16], paper_inits=True,
        depth_cell=DEPTH_CELL, knobs={"C7": {"in_cell": False}, "C10": {"repeats": 9}},
    ),
    "deep": Preset(
        name="deep", summary="C8 alone at 100, 300 and 1,000 layers, for a GPU",
        description="C8 alone at DeepNet's depths: DeepNorm, Post-LN and Pre-LN at 100, 300 and 1,000 layers, "
                    "64 wide, 300 steps, activation checkpointing, 5 seeds; 0.43 / about 1.4 / 4.73 s per step "
                    "at 100 / 300 / 1,000 layers on 2 CPU cores (benchmarks/deep_checkpointing.py; 300 "
                    "interpolated), so about 8 hours of training on this machine by extrapolation: for a GPU",
        base=QUICK_BASE, seeds=HELD_OUT_SEEDS, claims=["C8"],
        lrs=LRS, warmup=50, lr_fixed=1e-3, depths=[2, 4, 8, 16], paper_inits=True,
        knobs={"C8": {"depths": [100, 300, 1000],
                      "base": {"model.d_model": 64, "model.n_head": 2, "train.batch_size": 8, "train.steps": 300,
                               "train.activation_checkpointing": True, "diagnostics.layer_skip": False,
                               "diagnostics.interval": 300}}},
    ),
    "full": Preset(
        name="full", summary="every claim, deeper and longer, both init recipes, for a GPU",
        description=f"all {len(SEED_CLAIMS)} claims for a GPU: 6-layer, 128-wide models, 2,000 steps, 5 seeds, "
                    "depths to 32, C5–C7 at 12 layers, DeepNorm to 200 layers; 230× the standard preset's compute "
                    "in run_cost units (days on 2 CPU cores by extrapolation; not measured on a GPU)",
        base={**QUICK_BASE, "model.n_layer": 6, "model.d_model": 128, "train.steps": 2000,
              "train.eval_interval": 250, "train.eval_batches": 20, "train.ckpt_interval": 250,
              "diagnostics.interval": 250, "train.device": "auto"},
        seeds=HELD_OUT_SEEDS, claims=list(SEED_CLAIMS),
        lrs=LRS, warmup=200, lr_fixed=3e-3, depths=[2, 6, 12, 24, 32], paper_inits=True, init_pass="all",
        depth_cell={"model.n_layer": 12},  # 12 × 128 at the base's 2,000 steps, for C5, C6 and C7
        knobs={"C7": {"finetune": {"train.steps": 1000, "train.lr": 3e-4, "train.warmup_steps": 100}},
               "C8": {"depths": [50, 100, 200],
                      "base": {"model.d_model": 64, "model.n_head": 4, "diagnostics.layer_skip": False}}},
    ),
}


# The frontier preset's base: the quick base as a modern decoder, the setup the 2024–2026 papers train in (LLaMA-
# style: rotary positions, SwiGLU, no biases, GPT-2's N(0, 0.02) init with scaled residual outputs), LayerNorm
# (DyT's and Derf's baseline); no layer-skip ablation (no frontier claim reads it, and it costs one evaluation
# per layer); no plateau stop yet: the README's frontier table comes from a run without it, which a resumed
# frontier study must still match run for run
# β2 = 0.95: the AdamW β2 of every frontier paper's code that was checked (docs/frontier.md: DyT's LLaMA trainer,
# Derf's nanoGPT, NVIDIA/ngpt, OLMo 2, HybridNorm), not normlab's default 0.99
FRONTIER_BASE = {**QUICK_BASE, "model.positions": "rope", "model.mlp": "swiglu", "model.init": "gpt2",
                 "diagnostics.layer_skip": False, "diagnostics.interval": 300, "train.plateau_stop": "off",
                 "train.beta2": 0.95}
PRESETS["frontier"] = Preset(
    name="frontier", summary="the placements of 2024–2026 against their papers' headlines (F1–F8)",
    description="F1–F8 on a 2-core CPU: 4-layer, 64-wide char decoders with RoPE and SwiGLU, 300 steps, 5 seeds; "
                "nGPT also at 75 and 150 steps, DyT and LayerNorm also at 600, QK-norm over lr 0.03–0.3 without "
                "warmup, Keel, Post-LN and Pre-LN at 16 layers with warmup over lr 0.001–0.1; "
                + measured_cost("frontier"),
    base=FRONTIER_BASE, seeds=HELD_OUT_SEEDS, claims=list(FRONTIER_CLAIMS),
    lrs=LRS, warmup=50, lr_fixed=3e-3, depths=[4], paper_inits=True,
    # F1–F8's own knobs (nGPT's budgets, DyT's long budget, QK-norm's and Keel's lrs, Keel's depth and cell) are
    # their defaults, beside each claim in claims/frontier.py
)


# The nuisance factors `--vary` re-measures each training claim under, beyond its own level: the init recipe (the
# other one: `other_init`), context and width. Each is the overrides of its other level on the study's base, and
# how its two levels read. A claim whose own runs set one of a factor's keys (C8's narrow 32-token models) is not
# varied along it, and its verdict says so
FACTORS: dict[str, dict[str, Any]] = {
    "init": {},  # the other recipe, per claim (`other_init`): the init pass
    "context": {"model.block_size": 64, "train.eval_batches": 10},  # 64 tokens, the same val tokens per evaluation
    "width": {"model.d_model": 128},  # twice the CPU presets' width (4 heads of 32)
}


def factor_overrides(factor: str, base: RunConfig) -> dict[str, Any]:
    """The other level of a nuisance factor on a base (context: 64 tokens where the base has 32, else 32)."""
    if factor == "context" and base.model.block_size == 64:
        return {"model.block_size": 32, "train.eval_batches": 20}
    if factor == "width" and base.model.d_model == 128:
        return {"model.d_model": 64}
    return dict(FACTORS[factor])


def level_name(factor: str, config: dict[str, Any]) -> str:
    """A factor's level as a reader names it: `xiong`, `64 tokens`, `d 128`."""
    if factor == "init":
        return str(config.get(INIT_KEY))
    if factor == "context":
        return f"{config.get('model.block_size')} tokens"
    return f"d {config.get('model.d_model')}"


INIT_KEY = "model.init"
# the recipe the study re-measures a claim under: what most users train with (GPT-2's), or Xiong et al.'s where
# the claim's own is GPT-2's
OTHER_INIT = {"xiong": "gpt2", "gpt2": "xiong"}


def other_init(recipe: str) -> str:
    return OTHER_INIT.get(recipe, "gpt2")


@dataclass
class RunSpec:
    """One run of a study as the study hands it on: its id, its validated config with the corpus's vocabulary
    filled in, and that config as a dict, computed once, which the ledger stores and the workers train from
    without validating the config again. The id is the hash of the config as built, before its vocabulary is
    filled in: the data section already names the corpus, and ids stay those of studies from before the
    vocabulary was resolved at their start."""

    id: str
    config: RunConfig

    @functools.cached_property
    def data(self) -> dict[str, Any]:
        """`config.to_dict()`: what the ledger stores."""
        return self.config.to_dict()

    @functools.cached_property
    def flat(self) -> dict[str, Any]:
        """The config flattened (`model.n_layer` keys), as records compare themselves to a base."""
        return flatten(self.data)


@functools.lru_cache(maxsize=32)
def _text_vocab(path: str | None, tokenizer: str, vocab_from: str | None,
                tokenizer_dir: str | None) -> tuple[int, int | None]:
    tok = corpus_tokenizer(path, tokenizer, vocab_from, tokenizer_dir)
    return tok.vocab_size, tok.mask_id


def corpus_vocab(config: RunConfig) -> tuple[int, int | None]:
    """The tokens of a run's corpus (vocabulary size, the tokenizer's own mask id), read once per corpus per
    process."""
    d = config.data
    return _text_vocab(d.path, d.tokenizer, d.vocab_from, d.tokenizer_dir)


def build_config(preset: Preset, overrides: dict[str, Any], seed: int) -> RunConfig:
    """The run of `preset`'s base with `overrides` (dotted keys, typed values) at `seed`, validated."""
    return derive({}, {**preset.base, **overrides, "train.seed": seed})


@dataclass
class StudySpec:
    """A preset, possibly narrowed to some claims, plus a user's extra axes."""

    preset: Preset
    claims: list[str]
    axes: dict[str, list[Any]] = field(default_factory=dict)
    base_extra: dict[str, Any] = field(default_factory=dict)  # already merged into preset.base; kept for the record
    robustness: bool = False  # also rerun every claim's runs at preset.robust_threads threads (`fragile` marks)
    # --init-pass (True) / --no-init-pass (False): every training claim also judged under the other init, or none;
    # None: no override, the preset's choice (`Preset.init_pass`)
    init_pass_override: bool | None = None
    claim_seeds: dict[str, list[int]] = field(default_factory=dict)  # a claim's seeds after its rounds; else seeds
    # the nuisance factors re-measured beyond the init pass (`--vary context,width`; `init` is the init pass)
    vary: list[str] = field(default_factory=list)
    # the tokens of each corpus the study's runs read, by `corpus_key`: [vocabulary size, the tokenizer's own mask
    # id], resolved when a run on it is first built (the study's start) and stored with the study, so that every
    # run's config carries its vocabulary and `normlab report` reads no corpus
    tokens: dict[str, list] = field(default_factory=dict)
    # each corpus's [unigram, bigram] cross-entropy, by `corpus_key`: the trained line's two ends, resolved when the
    # study starts (`resolve_lines`) and stored with it, so that `normlab report` judges "trained" reading no corpus
    lines: dict[str, list] = field(default_factory=dict)
    # False for a study stored before its tokens were (`normlab report` on an older ledger): its runs' vocabulary
    # is left unset, as it was then, so that no corpus is read (records match it all the same: `UNPINNED`)
    resolve_vocab: bool = True
    # every run this study has built, by (base, overrides, seed): each config is validated once per process however
    # often the study expands (at load, at its start, at each seed round)
    _built: dict[str, RunSpec] = field(default_factory=dict, init=False, repr=False, compare=False)

    def run(self, overrides: dict[str, Any], seed: int) -> RunSpec:
        """The run of the preset's base with `overrides` at `seed` (`build_config`), built once per study."""
        key = json.dumps([self.preset.base, overrides, seed], sort_keys=True, default=repr)
        if key not in self._built:
            base_run = not overrides and seed == self.preset.seeds[0]  # the preset's own config: validated once
            self._built[key] = self._spec(self.preset.config if base_run else build_config(self.preset, overrides,
                                                                                            seed))
        return self._built[key]

    def _spec(self, config: RunConfig) -> RunSpec:
        """The run of `config` (validated): its id is the hash of the config as built, and the config it carries
        has its corpus's vocabulary filled in (`tokens`)."""
        if config.model.vocab_size is not None or not self.resolve_vocab:
            return RunSpec(config.hash(), config)
        key = corpus_key(config)
        if key not in self.tokens:
            self.tokens[key] = list(corpus_vocab(config))
        return RunSpec(config.hash(), with_vocab(config, *self.tokens[key]))

    def resolve_lines(self, runs: list[RunSpec]) -> None:
        """The trained line's two ends for each corpus the runs read (`corpus_lines`), where not already known."""
        for run in runs:
            key = corpus_key(run.config)
            if key not in self.lines:
                self.lines[key] = list(corpus_lines(run.config))

    def followup(self, source: dict[str, Any], overrides: dict[str, Any]) -> RunSpec:
        """A run that starts from a trained one (`Claim.followups`): the source's config (a record's dict) with
        `overrides`, its vocabulary left to the corpus as for every run; built once per study."""
        key = json.dumps([source, overrides], sort_keys=True, default=repr)
        if key not in self._built:
            model = {k: v for k, v in source["model"].items() if k != "vocab_size"}
            self._built[key] = self._spec(derive({**source, "model": model}, overrides))
        return self._built[key]

    def base_config(self) -> RunConfig:
        """The study's base run (the preset's base with the user's overrides, its first seed), validated: what
        every claim's groups are matched against on the axes they do not name."""
        return self.run({}, self.preset.seeds[0]).config

    def base_flat(self) -> dict[str, Any]:
        """`base_config` flattened (`model.n_layer` keys), as records compare themselves to it."""
        return self.run({}, self.preset.seeds[0]).flat

    def seeds_of(self, claim_id: str) -> list[int]:
        """The seeds a claim's runs and verdict use: the preset's, or more after sequential rounds."""
        return list(self.claim_seeds.get(claim_id, self.preset.seeds))

    def first_and_added(self, claim_id: str) -> tuple[list[int], list[int]]:
        """The claim's seeds of its first look, and those its rounds added (trained only for `round_runs`)."""
        seeds = self.seeds_of(claim_id)
        first = [s for s in seeds if s in self.preset.seeds]
        return first, [s for s in seeds if s not in self.preset.seeds]

    def look(self, claim_id: str) -> tuple[int, int] | None:
        """(this look, of how many) for a claim on the preset's sequential schedule (its knob `rounds`); None: it
        looks once."""
        rounds = self.preset.seed_rounds
        if len(rounds) < 2 or not CLAIMS.get(claim_id).knobs(self.preset).rounds:
            return None
        n = len(self.seeds_of(claim_id))
        return next((i + 1 for i, r in enumerate(rounds) if r >= n), len(rounds)), len(rounds)

    def next_seeds(self, claim_id: str) -> list[int] | None:
        """The claim's seeds at its next look (new seeds numbered on from the highest), or None at its last."""
        look = self.look(claim_id)
        if look is None or look[0] >= look[1]:
            return None
        seeds = self.seeds_of(claim_id)
        while len(seeds) < self.preset.seed_rounds[look[0]]:
            seeds.append(max(seeds) + 1)
        return seeds

    def robust_overrides(self) -> dict[str, Any]:
        """The one-bit change of numerics of the robustness pass: another intra-op thread count."""
        return {"train.threads": self.preset.robust_threads}

    def judges_both_inits(self, claim_id: str) -> bool:
        """Is this claim also judged under the other init? --init-pass / --no-init-pass, else the preset's choice
        (`Preset.init_pass`: none, the claims' own knob `init_pass`, or all)."""
        if self.init_pass_override is not None:
            return self.init_pass_override
        mode = self.preset.init_pass
        return mode == "all" or (mode == "chosen" and CLAIMS.get(claim_id).knobs(self.preset).init_pass)

    def inits(self, claim) -> list[str]:
        """The init recipes a claim is judged under: its paper's (or the base's), then (init pass) the other."""
        own = claim.init if self.preset.paper_inits else self.preset.config.model.init
        return [own] + ([other_init(own)] if self.judges_both_inits(claim.id) else [])

    def varied(self, claim, factor: str) -> dict[str, Any] | None:
        """The overrides of `factor`'s other level for this claim's runs, or None where the study does not vary
        it, or the claim's own runs set one of its keys (they fix that factor themselves)."""
        if factor not in self.vary or not claim.runs(self.preset):
            return None
        overrides = factor_overrides(factor, self.preset.config)
        if any(key in o for o in claim.runs(self.preset) for key in overrides):
            return None
        return overrides

    def axis_levels(self, claim) -> list[tuple[str, Any]]:
        """A study file's axes as this claim is varied along them: (key, value) for each value past the first
        (the first is the study's base), one axis at a time; none along an axis the claim's own runs set."""
        return [(key, value) for key, values in self.axes.items() if self.varies_axis(claim, key)
                for value in values[1:]]

    def varies_axis(self, claim, key: str) -> bool:
        runs = claim.runs(self.preset)
        return bool(runs) and not any(key in o for o in runs)

    def fixed_factors(self, claim) -> list[str]:
        """The factors the study varies that this claim's own runs fix (not re-measured for it)."""
        return [f for f in self.vary if claim.runs(self.preset) and self.varied(claim, f) is None]

    def expand(self, claim_registry) -> list[RunSpec]:
        """Every run the claims and the axes need, once each (dedup by config hash), in a stable order: a run
        needed by two claims, or by one claim's init pass and another's own init, is trained once."""
        wanted: list[tuple[str, dict[str, Any], list[int]]] = []  # (who needs it, overrides, seeds)
        for claim_id in self.claims:
            claim = claim_registry.get(claim_id)()
            first, added = self.first_and_added(claim_id)
            runs = [(o, first) for o in claim.runs(self.preset)] + \
                [(o, added) for o in claim.round_runs(self.preset)] if added else \
                [(o, first) for o in claim.runs(self.preset)]
            for i, recipe in enumerate(self.inits(claim)):
                who = f"claim {claim_id}" + (f" (init pass: {recipe})" if i else "")
                wanted.extend((who, {INIT_KEY: recipe, **o}, seeds) for o, seeds in runs)
            for factor in self.vary:
                overrides = self.varied(claim, factor)
                if overrides is not None:
                    wanted.extend((f"claim {claim_id} ({factor} pass)", {INIT_KEY: self.inits(claim)[0], **o,
                                                                          **overrides}, seeds) for o, seeds in runs)
        if self.robustness:
            wanted += [(f"{who} (robustness rerun)", {**o, **self.robust_overrides()}, seeds)
                       for who, o, seeds in list(wanted)]
        for claim_id in self.claims:  # a study file's axes: each claim's runs again at each other value
            claim = claim_registry.get(claim_id)()
            for key, value in self.axis_levels(claim):
                wanted.extend((f"claim {claim_id} (axis {key} = {value!r})",
                               {INIT_KEY: self.inits(claim)[0], **o, key: value}, self.seeds_of(claim_id))
                              for o in claim.runs(self.preset))
        runs: dict[str, RunSpec] = {}
        for source, overrides, seeds in wanted:
            for seed in seeds:
                run = self._run(overrides, seed, source)
                runs.setdefault(run.id, run)
        return list(runs.values())

    def _run(self, overrides: dict[str, Any], seed: int, source: str) -> RunSpec:
        try:
            return self.run(overrides, seed)
        except ConfigError as e:  # a claim's overrides clash with the base (e.g. a --set): say whose run it is
            raise ConfigError(f"{source} needs a run {overrides} (seed {seed}) that is not a valid config: "
                              f"{one_line(e)}") from None


def one_line(error: Exception) -> str:
    """A config error's lines ("invalid config:" and one per problem) as one line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return "; ".join(line for line in lines if line != "invalid config:")


STUDY_KEYS = ("preset", "claims", "seeds", "base", "axes", "vary")


def load_study(preset: str = "standard", study_file: str | Path | None = None, claims: list[str] | None = None,
               seeds: list[int] | None = None, overrides: list[str] | None = None,
               axes: dict[str, list[Any]] | None = None, robustness: bool = False,
               init_pass: bool | None = None, vary: list[str] | None = None) -> StudySpec:
    """The study for a preset name, or a user's study TOML (which names its preset and may add axes).
    `init_pass`: True or False overrides the preset's init pass (`--init-pass`, `--no-init-pass`); None keeps it.

    `overrides` (`key=value`, as `normlab train --set`) change the preset's base config. Everything is
    validated here, every run included, so a bad study fails before anything is written.
    """
    base_extra: dict[str, Any] = {}
    axes = dict(axes or {})
    if study_file is not None:
        data = read_study_file(study_file)
        preset = data.get("preset", preset)
        claims = claims or data.get("claims")
        seeds = seeds or data.get("seeds")
        base_extra = flatten(data.get("base", {}))
        axes = {**data.get("axes", {}), **axes}
        vary = vary or data.get("vary")
    base_extra.update(_parse_overrides(overrides or []))
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; valid: {', '.join(PRESETS)}")
    chosen = Preset(**{**PRESETS[preset].__dict__, "base": {**PRESETS[preset].base, **base_extra}})
    if seeds:
        chosen.seeds = _check_seeds(seeds, "seeds")
        if chosen.seed_rounds and len(chosen.seeds) != chosen.seed_rounds[0]:
            chosen.seed_rounds = []  # a schedule of looks starts at the preset's seeds: a user's own seeds look once
    claim_ids = list(claims) if claims else list(chosen.claims)
    for cid in claim_ids:
        CLAIMS.get(cid)  # unknown ids: a clear error listing the valid ones
    stray = [c for c in claim_ids if c in FRONTIER_CLAIMS and chosen.name != "frontier"]
    if stray:  # their knobs' defaults and their arms assume the frontier base; another base is not their setup
        raise ConfigError(f"claims {', '.join(stray)} are judged in their papers' setup, the 'frontier' preset's base "
                          f"(RoPE, SwiGLU, GPT-2's init); run them with --preset frontier, not {chosen.name!r}")
    factors = _check_vary(vary or [])
    if "init" in factors:
        init_pass = True  # --vary init is the init pass: every training claim also under the other recipe
    axes = _check_axes(axes, "study axis")
    if axes:  # the base takes each axis's first value: a claim's main verdict is judged there
        first = {key: values[0] for key, values in axes.items()}
        base_extra.update(first)
        chosen = dataclasses.replace(chosen, base={**chosen.base, **first})
    spec = StudySpec(chosen, claim_ids, axes, base_extra, robustness, init_pass,
                     vary=[f for f in factors if f != "init"])
    for key in axes:
        if not any(spec.varies_axis(CLAIMS.get(c)(), key) for c in claim_ids):
            raise ConfigError(f"study axis {key!r}: no claim of the study can be judged along it (claims "
                              f"{', '.join(claim_ids)}: each sets {key} in its own runs, or trains nothing); "
                              "give an axis a claim's runs leave to the base")
    _validate(spec, CLAIMS)
    check_given(spec.preset.config, "the study's base: ")
    for key, values in axes.items():
        for value in values[1:]:
            check_given(derive(spec.preset.config, {key: value}), f"study axis {key} = {value!r}: ")
    return spec


def read_study_file(path: str | Path) -> dict[str, Any]:
    """A study TOML, its keys checked: lists where lists are meant (claims = "C13" is a mistake, not a claim)."""
    data = _read_toml(path)
    where = f"study file {str(path)!r}"
    unknown = set(data) - set(STUDY_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; valid: {', '.join(STUDY_KEYS)}")
    if "preset" in data and not isinstance(data["preset"], str):
        raise ConfigError(f"{where}: preset must be a string, e.g. preset = \"quick\" (got {data['preset']!r})")
    for key, example in (("claims", '["C13"]'), ("seeds", "[0, 1]")):
        if key in data and not isinstance(data[key], list):
            raise ConfigError(f"{where}: {key} must be a list, e.g. {key} = {example} (got {data[key]!r})")
    if "claims" in data and not all(isinstance(c, str) for c in data["claims"]):
        raise ConfigError(f"{where}: claims must be claim ids, e.g. claims = [\"C13\"] (got {data['claims']!r})")
    if "seeds" in data:
        _check_seeds(data["seeds"], f"{where}: seeds")
    for key in ("base", "axes"):
        if key in data and not isinstance(data[key], dict):
            raise ConfigError(f"{where}: {key} must be a table, e.g. [{key}] (got {data[key]!r})")
    # a scalar axis is one value; an empty list has none and is refused in _check_axes
    data["axes"] = {k: v if isinstance(v, list) else [v] for k, v in data.get("axes", {}).items()}
    return data


def _check_vary(factors: Any) -> list[str]:
    """`--vary init,context,width`: known factors, each once, in the order given."""
    if not isinstance(factors, (list, tuple)):
        raise ConfigError(f"vary must be a list of factors, e.g. vary = [\"init\", \"width\"] (got {factors!r})")
    bad = [f for f in factors if f not in FACTORS]
    if bad:
        raise ConfigError(f"unknown factor {bad[0]!r} to vary; valid: {', '.join(FACTORS)}")
    return list(dict.fromkeys(factors))


def _check_seeds(seeds: Any, where: str) -> list[int]:
    if not isinstance(seeds, (list, tuple)) or not seeds:
        raise ConfigError(f"{where} must be a non-empty list of integers, e.g. [0, 1] (got {seeds!r})")
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int)]
    if bad:
        raise ConfigError(f"{where} must be integers, e.g. [0, 1] (got {bad[0]!r} in {list(seeds)!r})")
    return list(seeds)


def _check_axes(axes: dict[str, Any], where: str) -> dict[str, list[Any]]:
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where} {key!r} has no values (got {values!r}); give a non-empty list, "
                              f'e.g. "{key}" = [value1, value2]')
    return axes


def _parse_overrides(overrides: list[str]) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. train.steps=100)")
        holder: dict[str, Any] = {}
        apply_override(holder, f"v={value}")
        parsed[key.strip()] = holder["v"]
    return parsed


def _validate(spec: StudySpec, claim_registry) -> None:
    """The base, every value of every axis on its own (the clearest error), then every run."""
    try:
        spec.run({}, spec.preset.seeds[0])
    except ConfigError as e:
        raise ConfigError(f"the study's base config (preset {spec.preset.name!r} with its [base] and --set "
                          f"overrides) is not valid: {one_line(e)}") from None
    for key, values in spec.axes.items():
        for value in values:
            try:
                spec.run({key: value}, spec.preset.seeds[0])
            except ConfigError as e:
                raise ConfigError(f"study axis {key!r}: value {value!r} is not valid: {one_line(e)}") from None
    spec.expand(claim_registry)


def spec_from_meta(meta: dict[str, Any]) -> StudySpec:
    """The spec a ledger was run with, from what it stored (for `normlab report`): its preset's knobs as they
    were when it ran, its base, claims, seeds and passes. Nothing is re-expanded or re-validated: its runs are
    the ledger's, and today's preset (which may have changed since) is not consulted where the study stored
    its own."""
    study = meta["study"]
    if "preset_settings" in study:
        preset = stored_preset(study["preset_settings"])
    else:  # a study registered before its preset was stored: the preset of that name as it is today
        if study["preset"] not in PRESETS:
            raise ConfigError(f"the study was run with preset {study['preset']!r}, which this normlab does not "
                              f"know; valid: {', '.join(PRESETS)}")
        preset = dataclasses.replace(PRESETS[study["preset"]])
    preset = dataclasses.replace(preset, base=upgrade_overrides(study["base"]), seeds=list(study["seeds"]))
    if preset.seed_rounds and len(preset.seeds) != preset.seed_rounds[0]:
        preset.seed_rounds = []  # as `load_study`: a user's own seeds look once
    for cid in study["claims"]:
        CLAIMS.get(cid)  # a claim this normlab lacks: a clear error listing the valid ones
    spec = StudySpec(preset, list(study["claims"]), study.get("axes", {}), study.get("base_extra", {}),
                     study.get("robustness", False), study.get("init_pass_flag"),
                     vary=_check_vary(study.get("vary") or []))
    spec.claim_seeds = {k: list(v) for k, v in study.get("claim_seeds", {}).items()}
    spec.tokens = {k: list(v) for k, v in study.get("tokens", {}).items()}
    spec.resolve_vocab = "tokens" in study
    spec.lines = {k: list(v) for k, v in study.get("lines", {}).items()}
    return spec


# Where the Preset fields of a normlab before claims declared their own knobs (`Claim.Knobs`) went, for a ledger
# such a normlab wrote (`preset_settings`): each field's (claim, knob); the frontier's dict's keys likewise; each
# list of claims, the knob it set on each claim (only where it chose anything: a schedule of looks, a depth cell)
MOVED_FIELDS = {"stress_lrs": ("C14", "stress_lrs"), "deep_depths": ("C8", "depths"), "deep_base": ("C8", "base"),
                "finetune": ("C7", "finetune"), "init_seeds": ("C2", "init_seeds"),
                "timing_repeats": ("C10", "repeats")}
MOVED_FRONTIER = {"ngpt_fractions": ("F1", "fractions"), "long_steps": ("F2", "long_steps"), "qk_lrs": ("F7", "lrs"),
                  "keel_depth": ("F8", "depth"), "keel_lrs": ("F8", "lrs"), "keel_cell": ("F8", "cell")}


def stored_preset(settings: dict[str, Any]) -> Preset:
    """The preset a ledger stored (`dataclasses.asdict`), in this normlab's fields: the fields of an older
    normlab that became claims' knobs are moved there, and a newer normlab's fields or knobs that this one lacks
    are dropped, as is a knob at its claim's default."""
    settings = dict(settings)
    for key in ("base", "depth_cell"):  # an older normlab's 0 for `off`, `process`, `all`: today's names
        settings[key] = upgrade_overrides(settings.get(key) or {})
    knobs = {cid: {k: upgrade_overrides(v) if isinstance(v, dict) else v for k, v in values.items()}
             for cid, values in settings.get("knobs", {}).items()}
    for cid, knob, value in _moved_knobs(settings):
        knobs.setdefault(cid, {})[knob] = value
    if isinstance(settings.get("init_pass"), list):  # an older normlab's list: now the claims' own choice, or none
        settings["init_pass"] = "chosen" if settings["init_pass"] else "none"
    settings["knobs"] = {}
    for cid, values in knobs.items():
        defaults = _knobs_of(cid) if cid in CLAIMS else {}
        changed = {k: v for k, v in values.items() if k in defaults and v != defaults[k]}
        if changed:
            settings["knobs"][cid] = changed
    known = {f.name for f in dataclasses.fields(Preset)}
    return Preset(**{k: v for k, v in settings.items() if k in known})


def _moved_knobs(settings: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(claim, knob, value) of each setting an older normlab stored as a Preset field (`MOVED_FIELDS`, the
    `frontier` dict) or as a list of claims: each registered claim with that knob is in the list or not."""
    moved = [(*MOVED_FIELDS[k], v) for k, v in settings.items() if k in MOVED_FIELDS]
    moved += [(*MOVED_FRONTIER[k], v) for k, v in (settings.get("frontier") or {}).items() if k in MOVED_FRONTIER]
    members = {}  # knob: the claims the list put in, where the list chose anything
    if len(settings.get("seed_rounds") or []) > 1 and "round_claims" in settings:
        members["rounds"] = settings["round_claims"]
    if settings.get("depth_cell") and "cell_claims" in settings:
        members["in_cell"] = settings["cell_claims"]
    if isinstance(settings.get("init_pass"), list) and settings["init_pass"]:
        members["init_pass"] = settings["init_pass"]
    return moved + [(cid, knob, cid in claims) for knob, claims in members.items() for cid in CLAIMS
                    if knob in _knobs_of(cid)]


def _knobs_of(claim_id: str) -> dict[str, Any]:
    """A claim's knobs at their defaults, by name."""
    return dataclasses.asdict(CLAIMS.get(claim_id).Knobs())


def _read_toml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"study file {str(p)!r} does not exist")
    try:
        return tomllib.loads(p.read_text("utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"study file {str(p)!r} is not valid TOML: {e}") from None
