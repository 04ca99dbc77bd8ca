"""What an older normlab wrote, and how this one reads it: every such mapping, in one module.

normlab stores configs (a run directory's config.toml, a study ledger's rows, the preset a study ran with) and
ids derived from them. When a field is added, a value changes meaning or a setting moves, what was stored before
must still read as it trained and keep its id. Each mapping below names the change it answers, by date, oldest
first; no normlab import, so every floor can read it. Who applies them: `config.py` (a stored config's words, a
run's id), `study/records.py` (what a group's identity leaves out), `study/presets.py` (a stored preset's fields
that became claims' knobs).

What normlab stores carries the version of its schema: a study ledger in SQLite's `user_version`, a run
directory in its marker file. A mapping that rewrites what was stored (not an id's hash, which every version
keeps) applies to what an earlier version wrote, up to the version named beside it; what was stored before
versions were recorded reads as version 0, and a version newer than this normlab's is refused, not guessed at.
"""
from __future__ import annotations

# the schema of what this normlab stores. 1: words stored as words (`WORD_WAS_NUMBER` no longer applies), a
# preset stored with its claims' knobs (`MOVED_PRESET_FIELDS` no longer applies)
SCHEMA_VERSION = 1

# 2024 → 2026-11-28: fields added after runs were first hashed, and the value every earlier run had. A run's id
# leaves such a field out while it holds that value, so the ids and directories of the earlier runs stay valid
HASH_NEUTRAL = {"model.arch": "decoder", "train.activation_checkpointing": False, "diagnostics.layer_skip_most": 100,
                "model.positions": "learned", "model.rope_theta": 10000.0, "model.rope_fraction": 1.0,
                "model.qk_norm": "none", "model.gelu_approximate": "none", "model.head_transform": False,
                "model.head_bias": False, "train.init_from_match": "exact", "train.plateau_stop": 0.0,
                "model.learned_embed_scale": False, "model.embed_scale_positions": False,
                "train.weight_decay_on": "matrices", "diagnostics.end_of_run_budget": 0.25,
                "diagnostics.layer_skip_budgeted": True}

# until 2026-11-26 (schema 0): a field whose "nothing" is a word (`config.Word`: `off`, `process`, `all`) was
# written as this number. A stored config's number reads as the word (`config.upgrade_stored`), and a run's id
# hashes the number, as its run was registered under it; a number a user types for the word is refused
WORD_WAS_NUMBER_BEFORE = 1
WORD_WAS_NUMBER = {"train.grad_clip": 0.0, "train.threads": 0, "train.untrained_margin": 0.0,
                   "train.plateau_stop": 0.0, "diagnostics.interval": 0, "diagnostics.layer_skip_most": 0}

# 2026-11-28: values whose meaning changed after runs were hashed with them, hashed as the new meaning, so that a
# ledger or run directory made under the old one never answers for a run of the new (`gpt2`'s σ scales with the
# width; the old weights are `gpt2-fixed-std`, hashed under that name)
HASH_MEANING_CHANGED = {"model.init": ("gpt2", "gpt2 (linears sigma*sqrt(768/d), the stream as at 768)")}

# never part of a group's identity in a study's records: the seed, and the vocabulary (it follows from data.* and
# model.arch, which are compared; a study stored before it resolved its runs' vocabularies at its start has none in
# its base)
UNPINNED = {"train.seed", "model.vocab_size"}

# preset fields of an older normlab (schema 0) that became claims' knobs: each field's (claim, knob); the
# frontier's dict's keys likewise, and the lists of claims that became a knob each (`presets.stored_preset` moves
# them)
MOVED_FIELDS_BEFORE = 1
MOVED_PRESET_FIELDS = {"stress_lrs": ("C14", "stress_lrs"), "deep_depths": ("C8", "depths"),
                       "deep_base": ("C8", "base"), "finetune": ("C7", "finetune"),
                       "init_seeds": ("C2", "init_seeds"), "timing_repeats": ("C10", "repeats")}
MOVED_FRONTIER_FIELDS = {"ngpt_fractions": ("F1", "fractions"), "long_steps": ("F2", "long_steps"),
                         "qk_lrs": ("F7", "lrs"), "keel_depth": ("F8", "depth"), "keel_lrs": ("F8", "lrs"),
                         "keel_cell": ("F8", "cell")}


def newer_schema(version: int, where: str) -> str | None:
    """Why `where`, stored under schema `version`, cannot be read (None: it can): a newer normlab wrote it, and
    this one would read its fields as they meant before."""
    if version <= SCHEMA_VERSION:
        return None
    return (f"{where} was written by a newer normlab (schema {version}); this normlab reads schemas 0 to "
            f"{SCHEMA_VERSION}: upgrade normlab to read it; nothing was changed")
