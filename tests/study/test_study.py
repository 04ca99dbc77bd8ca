"""Studies end to end: expansion, the ledger, SIGKILL and resume, two processes on one directory."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from normlab.config import ConfigError
from normlab.study.claims import CLAIMS
from normlab.study.ledger import Ledger, pid_alive
from normlab.study.load import load_study, plan_of
from normlab.study.plan import plan_from_meta
from normlab.study.runs import build_config
from normlab.study.presets import PRESETS, stored_preset
from normlab.train import RunDir
from tests.conftest import judged_study

TINY = ["model.d_model=16", "model.n_head=2", "model.block_size=16", "train.batch_size=4",
        "train.eval_interval=50", "train.eval_batches=2", "train.ckpt_interval=25", "diagnostics.interval=50"]


def study_cmd(out, *extra):
    # the mechanics of a study (kill, resume, two processes, stacks) on C13's 4 runs, without its init pass, and
    # C9's measurement (built models only, about 2 s; C16's builds and trains all 98 scheme × normalizer models)
    args = [sys.executable, "-m", "normlab", "study", "--out", str(out), "--claims", "C9,C13", "--workers", "2",
            "--seeds", "0,1", "--no-init-pass"]
    for item in TINY:
        args += ["--set", item]
    return args + list(extra)


def test_quick_preset_covers_the_required_claims_with_two_seeds():
    quick = PRESETS["quick"]
    required = {"C1", "C2", "C3", "C4", "C5", "C6", "C9", "C10", "C11", "C13", "C16"}
    assert required <= set(quick.claims) and len(quick.seeds) >= 2
    assert set(PRESETS["full"].claims) == {f"C{i}" for i in range(1, 17)}


def test_expansion_dedups_shared_runs_by_config_hash():
    spec = load_study("quick")
    runs = spec.runs
    assert len({r.id for r in runs}) == len(runs)
    # C1's Pre-LN run at the fixed lr with warmup is the same run as C4's at the base depth and C13's baseline
    c13 = load_study("quick", claims=["C13"]).runs
    assert {r.id for r in c13} <= {r.id for r in runs}
    assert len(c13) == 2 * len(PRESETS["quick"].seeds)


def test_bad_study_input_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="unknown preset 'fast'.*standard, quick, deep, full"):
        load_study("fast")
    with pytest.raises(ValueError, match="unknown claim 'C99'"):
        load_study("quick", claims=["C99"])
    with pytest.raises(ConfigError, match="n_layers"):
        load_study("quick", overrides=["model.n_layers=3"])
    bad = tmp_path / "s.toml"
    bad.write_text('preset = "quick"\nsweeps = 1\n')
    with pytest.raises(ConfigError, match="unknown key.*sweeps"):
        load_study("quick", bad)


def test_a_study_file_axis_repeats_each_claims_runs_at_each_value(tmp_path):
    """An axis judges each claim at each value: every run of the claim again at every value past the first, the
    first the study's base; one axis at a time. C13's two runs at 3 norms: 6 runs, not 3 base runs."""
    path = tmp_path / "study.toml"
    path.write_text('preset = "quick"\nclaims = ["C13"]\nseeds = [3]\n[base.train]\nsteps = 7\n'
                    '[axes]\n"model.norm" = ["layernorm", "rmsnorm", "dyt"]\n')
    spec = load_study(study_file=path)
    runs = spec.runs
    assert sorted((r.config.model.norm, r.config.model.final_norm is not False) for r in runs) == [
        ("dyt", False), ("dyt", True), ("layernorm", False), ("layernorm", True), ("rmsnorm", False),
        ("rmsnorm", True)]
    assert {r.config.train.steps for r in runs} == {7} and {r.config.train.seed for r in runs} == {3}
    assert spec.base_config().model.norm == "layernorm"


def test_an_axis_no_claim_can_be_judged_along_is_refused(tmp_path):
    """C16's runs set the norm themselves: an axis on model.norm would change nothing C16 judges."""
    path = tmp_path / "study.toml"
    path.write_text('preset = "quick"\nclaims = ["C16"]\n[axes]\n"model.norm" = ["layernorm", "rmsnorm"]\n')
    with pytest.raises(ConfigError, match=r"study axis 'model.norm': no claim of the study can be judged along it"):
        load_study(study_file=path)


@pytest.mark.parametrize("text, where", [("[base.train]\nwarmup_steps = 25\n", "the study file's [base]"),
                                         ("", "--set")])
def test_a_base_setting_every_run_of_a_claim_replaces_is_refused_naming_both(tmp_path, text, where):
    """Old: configs/study_example.toml set warmup_steps = 25 and all 12 runs trained with 50, the preset's, while
    the report showed 25 under "Base:". Every run of C13 sets its own warmup, so the value is refused."""
    path = tmp_path / "study.toml"
    path.write_text('preset = "quick"\nclaims = ["C13"]\n' + text)
    overrides = ["train.warmup_steps=25"] if where == "--set" else []
    with pytest.raises(ConfigError, match=re.escape(f"{where} sets train.warmup_steps = 25, but every run of C13 "
                                                    "sets train.warmup_steps itself (50")):
        load_study(study_file=path, overrides=overrides)
    spec = load_study(study_file=path) if not text else load_study("quick", claims=["C13"])
    assert {r.config.train.warmup_steps for r in spec.runs} == {50}  # what its runs use, said above
    assert load_study("quick", claims=["C13"], overrides=["train.steps=70"]).preset.config.train.steps == 70


def test_ledger_claims_each_run_once(tmp_path):
    reg = Ledger(tmp_path)
    assert reg.add_runs([("a", {"x": 1}), ("b", {"x": 2})]) == 2
    assert reg.add_runs([("a", {"x": 1})]) == 0
    first, second = reg.claim_next(os.getpid()), reg.claim_next(os.getpid())
    assert {first[0], second[0]} == {"a", "b"} and reg.claim_next(os.getpid()) is None
    reg2 = Ledger(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with reg2._tx() as db:  # a run whose owner died is taken over
        db.execute("UPDATE runs SET owner_pid = ? WHERE id = 'a'", (dead.pid,))
    assert not pid_alive(dead.pid)
    assert reg2.claim_next(os.getpid())[0] == "a"


def wait_until(predicate, timeout=240.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise TimeoutError


def assert_complete_and_unduplicated(out, n_runs):
    reg = Ledger(out)
    rows = reg.rows()
    assert len(rows) == n_runs and all(r["status"] in ("completed", "failed_to_train") for r in rows), rows
    for row in rows:
        steps = [m["step"] for m in RunDir(reg.run_dir(row["id"])).metrics()]
        assert steps == sorted(set(steps)), f"run {row['id']} logged a step twice"
    verdicts = json.loads((out / "verdicts.json").read_text())
    assert verdicts["final"] and [v["id"] for v in verdicts["verdicts"]] == ["C9", "C13"]
    return rows


def test_sigkill_study_then_resume_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "study"
    # one worker: C13's two stacks (with and without a final norm) train one after the other, so the
    # kill finds one stack completed and one mid-training (the members of one stack finish together)
    proc = subprocess.Popen(study_cmd(out, "--set", "train.steps=300", "--workers", "1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    reg_path = out / "study.sqlite"

    def one_done_one_running():
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode())
        if not reg_path.is_file():
            return False
        try:
            counts = Ledger(out).counts()
        except Exception:
            return False
        return counts.get("completed", 0) >= 1 and counts.get("running", 0) >= 1

    wait_until(one_done_one_running)
    owners = [r["owner_pid"] for r in Ledger(out).rows() if r["status"] == "running"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_until(lambda: not any(pid_alive(p) for p in owners), timeout=30)  # the workers died with it
    before = Ledger(out).counts()
    assert before.get("completed", 0) < 4
    interrupted = [r["id"] for r in Ledger(out).rows() if r["status"] == "running"]
    # runs killed mid-training (a run that had finished training but was not yet recorded is only recorded)
    with_checkpoint = [i for i in interrupted if (Ledger(out).run_dir(i) / "checkpoint.pt").is_file()
                       and RunDir(Ledger(out).run_dir(i)).read_status()["status"] == "running"]

    resumed = subprocess.run(study_cmd(out, "--set", "train.steps=300"), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    rows = assert_complete_and_unduplicated(out, 4)
    assert interrupted and all(r["attempts"] == 2 for r in rows if r["id"] in interrupted)
    for run_id in with_checkpoint:  # continued from their checkpoints, not from scratch
        assert RunDir(Ledger(out).run_dir(run_id)).read_meta()["resumed_from_step"] is not None


@pytest.mark.usefixtures("ctrl_c_reaches_children")
def test_ctrl_c_stops_a_study_without_a_traceback_and_hands_its_runs_back(tmp_path):
    out = tmp_path / "study"
    proc = subprocess.Popen(study_cmd(out, "--set", "train.steps=2000"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)

    def training():
        assert proc.poll() is None, proc.stderr.read()
        try:
            return any(RunDir(Ledger(out).run_dir(r["id"])).metrics() for r in Ledger(out).rows()
                       if r["status"] == "running")
        except Exception:
            return False

    wait_until(training)
    owners = [r["owner_pid"] for r in Ledger(out).rows() if r["status"] == "running"]
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stdout + stderr and "KeyboardInterrupt" not in stdout + stderr
    assert "interrupted: 0 of 4 runs settled; run the same command again to resume" in stderr
    wait_until(lambda: not any(pid_alive(p) for p in owners), timeout=30)
    rows = Ledger(out).rows()
    assert {r["status"] for r in rows} == {"pending"} and all(r["attempts"] == 0 for r in rows)  # handed back
    statuses = {RunDir(Ledger(out).run_dir(r["id"])).read_status()["status"] for r in rows
                if (Ledger(out).run_dir(r["id"]) / "status.json").is_file()}
    assert statuses == {"interrupted"}


def test_two_study_processes_on_one_directory(tmp_path):
    out = tmp_path / "study"
    cmd = study_cmd(out, "--set", "train.steps=60", "--workers", "1")
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    codes = [p.wait(timeout=600) for p in procs]
    # the first to finish its share waits for the other's runs, and both end with the final report (old: it
    # exited 5, "partial", while the other still trained)
    assert codes == [0, 0], [p.stderr.read().decode() for p in procs]
    rows = assert_complete_and_unduplicated(out, 4)
    assert all(r["attempts"] == 1 for r in rows)  # nobody trained a run the other had


def test_claim_group_takes_runs_of_one_shape_together(tmp_path):
    reg = Ledger(tmp_path)
    reg.add_runs([("a1", {"k": "a"}), ("b1", {"k": "b"}), ("a2", {"k": "a"}), ("a3", {"k": "a"})])
    first = reg.claim_group(os.getpid(), group_of=lambda c: c["k"], limit_of=lambda c: 2)
    assert [rid for rid, _ in first] == ["a1", "a2"]
    second = reg.claim_group(os.getpid(), group_of=lambda c: c["k"], limit_of=lambda c: 2)
    assert [rid for rid, _ in second] == ["b1"]  # the next run's shape, then only its kind
    assert [rid for rid, _ in reg.claim_group(os.getpid(), group_of=lambda c: c["k"], limit_of=lambda c: 2)] == ["a3"]
    assert reg.claim_group(os.getpid()) == []


# slow: stacking is unit-tested in tests/train/test_group.py
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_study_stacks_runs_of_one_shape_unless_told_not_to(tmp_path):
    """C13's 4 runs are 2 shapes × 2 seeds: by default each shape trains as one stack of 2; --no-stack-runs trains
    each alone; the verdict inputs agree to fp32 rounding."""
    finals = {}
    for mode in ("--stack-runs", "--no-stack-runs"):
        out = tmp_path / mode.strip("-")
        proc = subprocess.run(study_cmd(out, "--set", "train.steps=20", "--workers", "1", mode),
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        reg = Ledger(out)
        sizes = [RunDir(reg.run_dir(r["id"])).read_meta().get("group", {}).get("size") for r in reg.rows()]
        assert sizes == ([2, 2, 2, 2] if mode == "--stack-runs" else [None] * 4)
        finals[mode] = [r.val_loss for r in reg.records()]
    assert finals["--stack-runs"] == pytest.approx(finals["--no-stack-runs"], rel=1e-5)


# slow: the fragile mark is unit-tested in tests/study/test_verdicts.py
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_robustness_reruns_each_claim_run_at_another_thread_count(tmp_path):
    out = tmp_path / "study"
    proc = subprocess.run(study_cmd(out, "--set", "train.steps=20", "--claims", "C13", "--robustness"),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    reg = Ledger(out)
    threads = sorted(json.loads((reg.run_dir(r["id"]) / "run.json").read_text())["environment"]["torch_threads"]
                     for r in reg.rows())
    assert threads == [1, 1, 1, 1, 2, 2, 2, 2]  # C13's 4 runs, then again at 2 threads
    c13 = json.loads((out / "verdicts.json").read_text())["verdicts"][0]
    assert c13["fragile"] in (True, False) and c13["robustness"]["changed"] == {"train.threads": 2}
    assert c13["robustness"]["verdict"] in ("holds", "does not hold", "inconclusive")


def test_runs_that_pin_more_threads_get_fewer_workers(monkeypatch):
    """2 workers × 2 threads on 2 cores made 7 s runs take minutes: reruns at 2 threads train 1 at a time."""
    from normlab.study import workers

    spec = load_study("quick", claims=["C13"], seeds=[0, 1], robustness=True)
    runs = spec.runs
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    phases = workers.phases(runs, workers=2, threads=1)
    assert [(len(ids), workers, threads) for ids, workers, threads in phases] == [(4, 2, 1), (4, 1, 2)]
    assert {r.config.train.threads for r in runs if r.id in phases[1][0]} == {2}
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 16)
    assert [p.workers for p in workers.phases(runs, workers=8, threads=2)] == [8, 8]


def test_records_from_an_older_ledger_get_new_config_fields_by_default():
    """A field added since a study was run (train.threads) must not make its runs match no group."""
    from normlab.study.records import RunRecord

    cfg = build_config(PRESETS["quick"], {}, 0).to_dict()
    del cfg["train"]["threads"]
    record = RunRecord.from_dict({"id": "x", "config": cfg, "status": "completed"})
    assert record.get("train.threads") == "process"


def test_an_older_record_is_filled_as_validating_it_would_fill_it_without_validating_it(monkeypatch):
    """An older ledger's record (fields missing, the 0s of then) reads as its config validated today would, typed,
    and nothing is validated to read it: `normlab report` on the 1,220-run held-out ledger validated 619 configs
    to upgrade its older records, and now none."""
    from normlab.config import RunConfig, stored_config, upgrade_stored, validate_config
    from normlab.nn.config import ModelConfig
    from normlab.study.records import RunRecord

    old = build_config(PRESETS["frontier"], {"train.grad_clip": "off"}, 0).to_dict()
    for section, key in (("train", "threads"), ("model", "positions"), ("diagnostics", "layer_skip_most"),
                         ("model", "scheme_options")):
        del old[section][key]
    old["train"].update(plateau_stop=0.0, grad_clip=0.0)  # as normlab wrote them until 2026-11-26
    expected = validate_config(upgrade_stored(old)).to_dict()
    assert expected["train"]["grad_clip"] == "off" and expected["model"]["positions"] == "learned"

    def refuse(*args, **kwargs):
        raise AssertionError("a stored record was validated again")

    monkeypatch.setattr(RunConfig, "model_validate", refuse)
    read = stored_config(old)
    assert read.to_dict() == expected and isinstance(read.model, ModelConfig) and read.model.positions == "learned"
    assert RunRecord.from_dict({"id": "x", "config": old, "status": "completed"}).config == read


# slow
# (the default suite stays under 10 min on 2 cores; `make test-slow` runs it)
@pytest.mark.slow
def test_every_presets_stored_form_reads_back_as_the_preset():
    """A study stores its preset (`dataclasses.asdict`, JSON in the ledger); `normlab report` reads it back as it
    was, the claims' knobs included."""
    for preset in PRESETS.values():
        assert stored_preset(json.loads(json.dumps(dataclasses.asdict(preset)))) == preset


def test_a_ledger_from_before_the_claims_had_knobs_is_read_with_its_stored_settings():
    """presets_before_knobs.json: every preset as the normlab before `Claim.Knobs` stored it, with one Preset field
    per claim setting (stress_lrs, deep_depths, ..., the `frontier` dict) and lists of claims (round_claims,
    init_pass, cell_claims). Read back, each value is the claim's knob, and each list the claims' membership."""
    stored = json.loads((Path(__file__).parent / "presets_before_knobs.json").read_text("utf-8"))
    for name, old in stored.items():
        spec = plan_from_meta({"study": {"preset": name, "preset_settings": old, "base": old["base"],
                                         "seeds": old["seeds"], "claims": old["claims"]}})
        knobs = {cid: CLAIMS.get(cid).knobs(spec.preset) for cid in ("C2", "C7", "C8", "C10", "C14", "F1", "F2",
                                                                      "F7", "F8")}
        assert (knobs["C14"].stress_lrs, knobs["C8"].depths, knobs["C8"].base, knobs["C7"].finetune,
                knobs["C2"].init_seeds, knobs["C10"].repeats) == (old["stress_lrs"], old["deep_depths"],
                                                                   old["deep_base"], old["finetune"], old["init_seeds"],
                                                                   old["timing_repeats"]), name
        frontier = {"ngpt_fractions": knobs["F1"].fractions, "long_steps": knobs["F2"].long_steps,
                    "qk_lrs": knobs["F7"].lrs, "keel_depth": knobs["F8"].depth, "keel_lrs": knobs["F8"].lrs,
                    "keel_cell": knobs["F8"].cell}
        assert old["frontier"].items() <= frontier.items(), name
        rounds = old["round_claims"] if len(old["seed_rounds"]) > 1 else []
        assert [c for c in old["claims"] if spec[c].look] == [c for c in old["claims"] if c in rounds], name
        both = [c for c in old["claims"] if old["init_pass"] == "all" or c in old["init_pass"]]
        assert [c for c in old["claims"] if len(spec[c].inits) == 2] == both, name
        in_cell = {c for c in ("C5", "C6", "C7") if old["depth_cell"] and c in old["cell_claims"]}
        assert {c for c in ("C5", "C6", "C7") if CLAIMS.get(c)().cell_overrides(spec.preset)} == in_cell, name


def test_c7_fine_tunes_each_best_tuned_run_once_its_sources_are_done(tmp_path):
    """C7's transfer half: after the lr sweep, every seed of each scheme's best lr is fine-tuned on Paradise
    Lost (a follow-up run with train.init_from = the source's directory); `normlab report` finds the same runs."""
    from normlab.study.measuring import measure_claims
    from normlab.study.runner import run_study
    from normlab.study.state import completion, study_ids

    spec = load_study("quick", claims=["C7"], seeds=[0, 1], overrides=TINY + [
        "train.steps=8", "model.n_layer=1", "train.eval_interval=4", "diagnostics.interval=off",
        "diagnostics.layer_skip=false", "train.untrained_margin=off"])
    # at the base (1 layer × 8 steps), not in the depth cell (12 layers × 1,000 steps), which made this test 3 min
    spec = plan_of(dataclasses.replace(spec.spec, preset=dataclasses.replace(spec.preset, lrs=[1e-3, 1e-2],
                                                                                warmup=2, knobs={
        **spec.preset.knobs, "C7": {"in_cell": False, "finetune": {
            "train.steps": 4, "train.lr": 3e-4, "train.warmup_steps": 1}}})))
    out = run_study(spec, tmp_path / "s", workers=1, stack_runs=False)
    status, verdicts = judged_study(spec, tmp_path / "s", out)
    assert status.final and out.counts == {"completed": 2 * 2 * 2 + 2 * 2}  # 8 sweep runs, 2 schemes × 2 seeds tuned
    ledger = Ledger(tmp_path / "s")
    records = {r.id: r for r in ledger.records()}
    tuned = [r for r in records.values() if r.get("train.init_from")]
    v = verdicts[0]
    for r in tuned:
        source = records[os.path.basename(r.get("train.init_from"))]
        assert r.get("data.path") == "paradise_lost" and r.get("data.vocab_from") == "tinyshakespeare"
        assert r.get("train.steps") == 4 and r.get("train.lr") == 3e-4 and r.seed == source.seed
        assert source.get("train.lr") == v.details["best_lr"][source.get("model.scheme")]
    assert sorted(r.get("model.scheme") for r in tuned) == ["post", "post", "pre", "pre"]
    assert v.details["finetune_pre"]["n_runs"] == 2 and v.details["finetune_post"]["n_runs"] == 2
    # the report rebuilds the study from the ledger: the same run ids, nothing missing, final
    again = plan_from_meta(ledger.meta())  # with the preset as it ran (lrs, warmup, fine-tune budget)
    ids = study_ids(again, ledger, ledger.meta()["study"]["run_ids"])
    assert sorted(ids) == sorted(records) and completion(again, ledger, ids, measure_claims(again, ledger, False)).final

    # the study moved elsewhere (copied off a cluster, say), its runs with it: the fine-tunes' init_from names the
    # old place, yet they are the same runs, and one still to train starts from its source in the new place
    import shutil
    import sqlite3

    moved = tmp_path / "moved"
    shutil.move(tmp_path / "s", moved)
    ledger = Ledger(moved)
    ids = study_ids(again, ledger, ledger.meta()["study"]["run_ids"])
    assert sorted(ids) == sorted(records) and completion(again, ledger, ids, measure_claims(again, ledger, False)).final
    redo = tuned[0].id
    shutil.rmtree(ledger.run_dir(redo))  # the test's own run: trained again from scratch below
    with sqlite3.connect(moved / "study.sqlite") as db:
        db.execute("UPDATE runs SET status = 'pending', result = NULL, attempts = 0 WHERE id = ?", (redo,))
    again_out = run_study(again, moved, workers=1, stack_runs=False)
    status, _ = judged_study(again, moved, again_out)
    assert status.final and again_out.counts == out.counts and not status.failed
    meta = json.loads((ledger.run_dir(redo) / "run.json").read_text())
    assert meta["init_from"] == str(ledger.run_dir(os.path.basename(tuned[0].get("train.init_from"))).resolve())


def test_claims_run_on_the_encoder_decoder_through_the_study_base():
    """Xiong et al.'s own architecture: C1 and C2 expand to encoder–decoder runs when the base says so, and the
    depth sweep scales both stacks (n_dec_layer follows n_layer)."""
    from normlab.nn.model import EncoderDecoder, build_model

    spec = load_study("standard", claims=["C1", "C2"], overrides=['model.arch="encoder-decoder"'])
    runs = spec.runs
    assert runs and all(r.config.model.arch == "encoder-decoder" for r in runs)
    deepest = max(runs, key=lambda r: r.config.model.n_layer).config.model
    model = build_model(deepest.model_copy(update={"vocab_size": 67}))
    assert isinstance(model, EncoderDecoder) and len(model.encoder) == len(model.decoder) == deepest.n_layer


def test_deep_preset_runs_c8_at_deepnets_depths_with_checkpointing():
    spec = load_study("deep")
    runs = spec.runs
    assert spec.claims == ["C8"] and len(runs) == 3 * 3 * 5
    assert {(r.config.model.n_layer, r.config.model.scheme) for r in runs} == {
        (d, s) for d in (100, 300, 1000) for s in ("deepnorm", "post", "pre")}
    assert all(r.config.train.activation_checkpointing for r in runs)


def test_the_full_presets_stated_compute_is_what_its_runs_add_up_to():
    """`full`'s description and the README's presets table give its compute as a multiple of standard's in run_cost
    units (first looks, no fine-tunes): the figure both state is the one the two presets' runs add up to, to 5 %."""
    import re
    from pathlib import Path

    from normlab.study.jobs import run_cost

    def cost(preset):
        return sum(run_cost(r.config.to_dict()) for r in load_study(preset).runs)

    ratio = cost("full") / cost("standard")
    readme = (Path(__file__).parents[2] / "README.md").read_text("utf-8")
    stated = [re.search(r"(\d+)× the standard preset's compute", PRESETS["full"].description),
              re.search(r"\| `full` \|[^\n]*?(\d+)× standard's compute", readme)]
    assert all(stated), "the compute multiple is missing from full's description or the README's presets table"
    for m in stated:
        assert abs(int(m.group(1)) / ratio - 1) < 0.05, (m.group(0), ratio)


def test_the_init_pass_judges_a_claim_under_both_recipes_and_reuses_shared_runs(tmp_path):
    """C13 is GPT-2's claim: judged under gpt2, re-measured under xiong; its xiong baseline (Pre-LN with the final
    norm) is the very run C10 and C1 judge under xiong, so it is registered once."""
    both = load_study("standard", claims=["C13"], seeds=[0, 1]).runs
    assert sorted(r.config.model.init for r in both) == ["gpt2"] * 4 + ["xiong"] * 4
    assert [r.config.model.init for r in load_study("standard", claims=["C13"], seeds=[0, 1],
                                                    init_pass=False).runs] == ["gpt2"] * 4
    with_c10 = load_study("standard", claims=["C13", "C10"], seeds=[0, 1]).runs
    assert len(with_c10) == 8 + 8 - 4  # C10's two inits × 2 norms × 2 seeds share 4 runs with C13's
    args = [sys.executable, "-m", "normlab", "study", "--out", str(tmp_path / "s"), "--claims", "C13", "--workers", "2",
            "--seeds", "0,1", "--init-pass", "--set", "train.steps=20"]
    proc = subprocess.run(args + [a for item in TINY for a in ("--set", item)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "s" / "verdicts.json").read_text())
    (v,) = doc["verdicts"]
    assert v["init"] == "gpt2" and v["other_init"]["recipe"] == "xiong"
    assert isinstance(v["init_dependent"], bool)
    assert v["init_dependent"] == (v["other_init"]["verdict"] != v["verdict"])
    assert "GPT-2" in v["settings"]["init"]
