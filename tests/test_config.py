"""Config loading, overrides and the errors a user sees."""
from __future__ import annotations

from pathlib import Path

import pytest

import tomli_w

from normlab.config import ConfigError, RunConfig, apply_override, load_config, validate_config

REPO = Path(__file__).resolve().parents[1]


def test_nanogpt_config_reads_as_the_documented_recipe():
    cfg = load_config(REPO / "configs" / "nanogpt_cpu.toml")
    m, t = cfg.model, cfg.train
    assert (m.n_layer, m.n_head, m.d_model, m.block_size) == (4, 4, 128, 64)
    assert (m.scheme, m.norm, m.mlp, m.bias, m.dropout, m.tie_weights) == ("pre", "layernorm", "gelu", False, 0.0, True)
    assert (t.batch_size, t.lr, t.beta2, t.weight_decay, t.warmup_steps) == (12, 1e-3, 0.99, 0.1, 100)
    assert (t.min_lr, t.steps, t.decay_steps, t.grad_clip, t.eval_batches) == (1e-4, 2000, 2000, 1.0, 20)


def test_overrides_parse_toml_values_and_strings():
    raw: dict = {}
    apply_override(raw, "model.n_layer=6")
    apply_override(raw, "train.lr=3e-4")
    apply_override(raw, "model.scheme=post")
    apply_override(raw, "model.bias=true")
    apply_override(raw, "model.scheme_options.mix_ratio=0.5")
    assert raw == {"model": {"n_layer": 6, "scheme": "post", "bias": True, "scheme_options": {"mix_ratio": 0.5}},
                   "train": {"lr": 3e-4}}


def test_unknown_key_names_the_closest_valid_ones():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["model.n_layers=6"])
    assert "model.n_layers" in str(e.value) and "'n_layer'" in str(e.value)
    with pytest.raises(ConfigError, match="Did you mean 'train'"):
        load_config(None, ["trian.lr=1"])


def test_bad_values_name_the_value_and_the_valid_ones():
    with pytest.raises(ConfigError, match=r"unknown scheme 'prenorm'.*Valid: post, pre, sandwich"):
        load_config(None, ["model.scheme=prenorm"])
    with pytest.raises(ConfigError, match=r"unknown normalizer 'rms'.*'rmsnorm'"):
        load_config(None, ["model.norm=rms"])
    with pytest.raises(ConfigError, match="schedule"):
        load_config(None, ["train.schedule=linear"])
    with pytest.raises(ConfigError, match="divisible"):
        load_config(None, ["model.d_model=100", "model.n_head=3"])
    with pytest.raises(ConfigError, match="'deepnorm' cannot be used with normalizer 'none'"):
        load_config(None, ["model.scheme=deepnorm", "model.norm=none"])
    with pytest.raises(ConfigError, match=r"no option 'mix_ratio'.*\(it takes none\)"):
        load_config(None, ["model.scheme_options.mix_ratio=0.5"])
    with pytest.raises(ConfigError, match="min_lr"):
        load_config(None, ["train.lr=1e-4", "train.min_lr=1e-3"])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["model.n_layer"])


def test_missing_and_malformed_config_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\nn_layer = 3")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_toml_round_trip_and_hash(tmp_path):
    cfg = load_config(None, ["model.scheme=mix", "model.scheme_options.mix_ratio=0.5", "model.norm=dyt",
                             "model.norm_options.alpha_init=0.7"])
    path = tmp_path / "c.toml"
    path.write_text(cfg.to_toml())
    again = load_config(path)
    assert again == cfg and again.hash() == cfg.hash()
    assert load_config(None, ["train.seed=2"]).hash() != RunConfig().hash()


def test_run_ids_of_decoder_runs_survive_the_arch_field():
    """Adding model.arch changed every decoder run's id (and re-queued a whole study's runs) until the hash left
    it out at its old value; these ids were computed by normlab before arch existed."""
    from normlab.config import RunConfig, validate_config

    assert RunConfig().hash() == "cfd5bd20c792"
    assert validate_config({"model": {"scheme": "post", "n_layer": 3}}).hash() == "3cfc109dfeef"
    assert validate_config({"model": {"arch": "decoder"}}).hash() == RunConfig().hash()
    assert validate_config({"model": {"arch": "encoder"}}).hash() != RunConfig().hash()


# -- fields whose "nothing" is a word, not 0 ------------------------------------------------------------------
NAMED_CASES = [("train", "grad_clip", "off"), ("train", "threads", "process"), ("train", "untrained_margin", "off"),
               ("train", "plateau_stop", "off"), ("diagnostics", "interval", "off"),
               ("diagnostics", "layer_skip_most", "all")]


@pytest.mark.parametrize("section, key, word", NAMED_CASES)
def test_zero_is_refused_where_it_meant_a_word_and_the_error_names_the_word(section, key, word):
    from normlab.config import WORDS

    assert WORDS[f"{section}.{key}"].word == word
    with pytest.raises(ConfigError, match=rf"{section}\.{key}: 0 is not a value here; write '{word}'"):
        validate_config({section: {key: 0}})
    assert getattr(validate_config({section: {key: word}}), section).model_dump()[key] == word


@pytest.mark.parametrize("section, key, word", NAMED_CASES)
def test_a_config_an_older_normlab_wrote_with_0_reads_as_the_word_and_keeps_its_id(section, key, word, tmp_path):
    """Run directories and study ledgers hold configs written with 0 for these words: they are read with the
    word, and hash to the id they were registered under (the hash of the 0)."""
    import hashlib
    import json

    from normlab.compat import HASH_NEUTRAL, WORD_WAS_NUMBER
    from normlab.config import WORDS
    from normlab.rundir import RunDir

    cfg = validate_config({section: {key: word}})
    old = cfg.to_dict()
    for dotted, w in WORDS.items():  # as that normlab wrote it: 0 for every word
        s, k = dotted.split(".")
        if old[s][k] == w.word:
            old[s][k] = WORD_WAS_NUMBER[dotted]
            assert WORD_WAS_NUMBER[dotted] == 0
    # the id an older normlab gave it: the plain hash of its dict, neutral fields at their value left out
    legacy = json.loads(json.dumps(old))
    for dotted, value in HASH_NEUTRAL.items():
        s, k = dotted.split(".")
        if legacy.get(s, {}).get(k) == value:
            del legacy[s][k]
    assert cfg.hash() == hashlib.sha256(json.dumps(legacy, sort_keys=True).encode()).hexdigest()[:12]

    run = RunDir(tmp_path / "old")
    run.path.mkdir()
    run.config_path.write_text(tomli_w.dumps(old), "utf-8")
    assert run.read_config() == cfg
    from normlab.config import stored_config, upgrade_stored
    from normlab.study.jobs import run_config

    # a ledger's row as a worker claims it (`claim_jobs`: read under the ledger's schema, 0 here)
    assert run_config(upgrade_stored(old, schema=0)) == cfg and stored_config(old) == cfg


def test_the_named_fields_mean_what_their_words_say():
    t = validate_config({"train": {"grad_clip": "off", "threads": "process", "plateau_stop": "off",
                                   "untrained_margin": "off"}}).train
    words = ("grad_clip", "threads", "plateau_stop", "untrained_margin")
    assert [t.number(k) for k in words] == [None, None, None, None]
    t = validate_config({"train": {"grad_clip": 0.5, "threads": 2, "plateau_stop": 0.5}}).train
    assert [t.number(k) for k in words] == [0.5, 2, 0.5, 0.1]
    d = validate_config({"diagnostics": {"interval": "off", "layer_skip_most": "all"}}).diagnostics
    assert (d.number("interval"), d.number("layer_skip_most")) == (None, None)
    with pytest.raises(AttributeError, match="holds no word"):  # only a word field has a number to read
        t.number("steps")
    with pytest.raises(ConfigError, match=r"train.grad_clip: should be .*, or 'off' for no clipping \(got 'of'\)"):
        validate_config({"train": {"grad_clip": "of"}})


def test_a_run_directorys_own_config_toml_reads_with_the_old_spelling_and_a_users_file_does_not(tmp_path):
    """`normlab train RUN/config.toml --out NEW` and `normlab check RUN/config.toml` read a config an older
    normlab wrote (threads = 0, plateau_stop = 0.0); a TOML file of the user's own is held to today's spelling."""
    from normlab.rundir import RunDir, read_config_file

    old = RunConfig().to_dict()
    old["train"].update(threads=0, plateau_stop=0.0)
    from normlab.rundir.layout import MARKER

    run = RunDir(tmp_path / "run")
    run.create()
    run.config_path.write_text(tomli_w.dumps(old), "utf-8")
    with pytest.raises(ConfigError, match="train.threads: 0 is not a value here"):
        read_config_file(run.config_path)  # today's schema never wrote a number for a word
    marker = run.read_json(MARKER)
    run.write_json(MARKER, {k: v for k, v in marker.items() if k != "schema"})  # as an older normlab made it
    cfg = read_config_file(run.config_path, ["train.steps=700"])
    assert (cfg.train.threads, cfg.train.plateau_stop, cfg.train.steps) == ("process", "off", 700)
    with pytest.raises(ConfigError, match="train.threads: 0 is not a value here"):
        read_config_file(run.config_path, ["train.threads=0"])  # an override is today's spelling
    mine = tmp_path / "config.toml"
    mine.write_text(tomli_w.dumps(old), "utf-8")
    with pytest.raises(ConfigError, match="train.threads: 0 is not a value here; write 'process'"):
        read_config_file(mine)


def test_a_warmup_longer_than_the_run_is_refused_naming_both_and_a_stored_run_is_read_as_it_trained(tmp_path):
    with pytest.raises(ConfigError, match=r"train.warmup_steps = 100 is longer than the run \(train.steps = 60\)"):
        load_config(None, ["train.steps=60"])  # the default warmup, 100 steps, in a 60-step run
    assert load_config(None, ["train.steps=60", "train.warmup_steps=60"]).train.warmup_steps == 60
    path = tmp_path / "config.toml"
    path.write_text(tomli_w.dumps({"train": {"steps": 60}}))
    assert load_config(path, stored=True).train.warmup_steps == 100  # a run that trained so is still read


def test_each_word_field_is_declared_once_and_compat_knows_what_it_was_written_as():
    """`named` declares a word field (its number, word and meaning) once; `WORDS` is read from the declarations,
    and the compatibility module holds the number an older normlab wrote for each word, for every word field."""
    from normlab.compat import WORD_WAS_NUMBER
    from normlab.config import WORDS

    assert set(WORDS) == set(WORD_WAS_NUMBER)
    assert {w.word for w in WORDS.values()} == {"off", "process", "all"}


def test_a_change_names_each_field_once_typed_and_reads_as_dotted_overrides():
    """A claim's run is a `Change`: fields by their own names (or dotted, as a preset's data gives them), each value
    of its field's type, refused when made; it reads as the dotted overrides `derive` applies, values as given."""
    from normlab.config import Change, derive

    change = Change(scheme="pre", lr=1e-3, warmup_steps=0)
    assert dict(change) == {"model.scheme": "pre", "train.lr": 1e-3, "train.warmup_steps": 0}
    assert change == Change({"model.scheme": "pre", "train.lr": 1e-3}, warmup_steps=0)
    assert dict(change | {"model.n_layer": 8, "train.lr": 3e-3}) == {"model.scheme": "pre", "train.lr": 3e-3,
                                                                      "train.warmup_steps": 0, "model.n_layer": 8}
    assert isinstance({"model.norm": "rmsnorm"} | change, Change)
    assert derive({}, change).train.lr == 1e-3
    with pytest.raises(ConfigError, match="'shceme' is not a config field.*did you mean scheme"):
        Change(shceme="pre")
    with pytest.raises(ConfigError, match="'model.lr' is not a config field"):
        Change({"model.lr": 1e-3})
    with pytest.raises(ConfigError, match=r"train.lr = '0.1'"):
        Change(lr="0.1")
    with pytest.raises(ConfigError, match="changed twice"):
        Change({"model.scheme": "pre"}, scheme="post")
