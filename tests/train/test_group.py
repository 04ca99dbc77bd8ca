"""Many runs as one: a member trained in a group is the run trained alone (to fp32 rounding), a diverging
member never touches the others, and a killed group resumes each member exactly."""
from __future__ import annotations

import itertools
import sqlite3

import pytest

from normlab.nn.norms import NORMS
from normlab.nn.schemes import SCHEMES
from normlab.rundir import RunDir
from normlab.train import train
from normlab.train.group import GroupTrainer, group_key
from tests.conftest import tiny_config

# Measured over every scheme × normalizer (8 steps, two members): losses and gradient norms agree to
# 2.4e-7 relative, per-layer diagnostics to 8.4e-5 (ScaleNorm's scalar gain sums many terms).
CURVE_RTOL = 1e-6
DIAG_RTOL = 1e-3  # relative to max(|value|, 1e-3)
CURVE_KEYS = ("train_loss", "val_loss", "grad_norm", "lr")
TIMING_KEYS = {"tokens_per_s", "elapsed_s"}

# every scheme with LayerNorm, every normalizer with Pre-LN (rmsnorm there is the fused C++ kernel
# when alone, and the reference formula in a stack), and the schemes with their own constants on RMSNorm
# what the registry says cannot stack (Admin's ω, ResiDual's x_d, nGPT's scaling vectors, the residual states of
# 2026): the stacked trainer must refuse exactly these
TRAIN_ALONE = {s for s in SCHEMES.names() if not SCHEMES.get(s).facts.stackable}
STACKABLE = [s for s in SCHEMES.names() if SCHEMES.get(s).facts.stackable]
FAST_COMBOS = sorted({(s, "layernorm") for s in STACKABLE} | {("pre", n) for n in NORMS.names()}
                     | {(s, "rmsnorm") for s in ("deepnorm", "mix", "lns", "subln")})
ALL_COMBOS = [(s, n) for s, n in itertools.product(STACKABLE, NORMS.names())  # every pair a config accepts
              if (s, n) not in FAST_COMBOS and n not in SCHEMES.get(s).facts.incompatible_norms]


def test_schemes_that_cannot_be_stacked_train_alone():
    from normlab.train.group import groupable

    norm_of = {s: SCHEMES.get(s).facts.requires.get("norm", ("layernorm",))[0] for s in SCHEMES.names()}  # nGPT: l2
    assert {s for s in SCHEMES.names() if not groupable(member(0, 1e-3, scheme=s, norm=norm_of[s]))} == TRAIN_ALONE
    assert not groupable(member(0, 1e-3, scheme="admin")) and not groupable(member(0, 1e-3, scheme="residual"))
    assert groupable(member(0, 1e-3, scheme="post"))


def member(seed: int, lr: float, scheme: str = "pre", norm: str = "layernorm", init: str = "normal", **train_opts):
    opts = {"seed": seed, "lr": lr, "steps": 8, "eval_interval": 4, "ckpt_interval": 4, **train_opts}
    return tiny_config(model={"scheme": scheme, "norm": norm, "init": init}, train=opts, diagnostics={"interval": 4})


def diagnostics(path) -> dict:
    with sqlite3.connect(path / "diagnostics.sqlite") as db:
        return {r[:-1]: r[-1] for r in db.execute("SELECT step, layer, site, metric, head, value FROM layer_metrics")}


def without_timing(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


def assert_same_run(grouped, alone):
    g, a = RunDir(grouped).metrics(), RunDir(alone).metrics()
    assert [r["step"] for r in g] == [r["step"] for r in a]
    for rg, ra in zip(g, a):
        for key in CURVE_KEYS:
            if key in ra:
                assert rg[key] == pytest.approx(ra[key], rel=CURVE_RTOL, abs=1e-9), (rg["step"], key)
    dg, da = diagnostics(grouped), diagnostics(alone)
    assert dg.keys() == da.keys()
    for key, value in da.items():
        if value is None or value != value:  # NaN, stored as NULL (the update ratio of a weight that starts at 0)
            assert dg[key] is None or dg[key] != dg[key], key
            continue
        assert abs(dg[key] - value) <= DIAG_RTOL * max(abs(value), 1e-3), key
    assert RunDir(grouped).read_status()["val_loss"] == pytest.approx(RunDir(alone).read_status()["val_loss"],
                                                                      rel=CURVE_RTOL)
    assert RunDir(grouped).read_json("layer_skip.json")["effective_depth"] == \
        RunDir(alone).read_json("layer_skip.json")["effective_depth"]


def check_equivalence(tmp_path, scheme, norm, init="normal", **model):
    cfgs = [member(0, 3e-3, scheme, norm, init), member(1, 1e-3, scheme, norm, init, warmup_steps=0,
                                                         weight_decay=0.0, grad_clip=0.5, schedule="constant")]
    if model:  # model settings beside the scheme and normalizer (the frontier's rotary positions, DyT's scalar)
        cfgs = [c.model_copy(update={"model": c.model.model_copy(update=model)}) for c in cfgs]
        assert all(c.model.stackable for c in cfgs)
    results = GroupTrainer([(c, str(tmp_path / f"g{i}")) for i, c in enumerate(cfgs)]).run()
    assert [r.status for r in results] == ["completed", "completed"]
    for i, cfg in enumerate(cfgs):
        train(cfg, str(tmp_path / f"a{i}"))
        assert_same_run(tmp_path / f"g{i}", tmp_path / f"a{i}")
        assert RunDir(tmp_path / f"g{i}").read_meta()["group"]["size"] == 2


@pytest.mark.parametrize("scheme,norm", FAST_COMBOS)
def test_member_matches_the_run_trained_alone(tmp_path, one_torch_thread, scheme, norm):
    check_equivalence(tmp_path, scheme, norm)


@pytest.mark.parametrize("norm, model", [
    ("rmsnorm", dict(positions="rope", mlp="swiglu", bias=False)),
    ("dyt", dict(positions="rope", learned_embed_scale=True)),
    ("derf", dict(learned_embed_scale=True, embed_scale_positions=True))])
def test_the_frontiers_runs_stack_as_members_that_match_the_runs_trained_alone(tmp_path, one_torch_thread, norm,
                                                                             model):
    """Old: rotary positions and a learned embedding scalar kept a run out of a stack, so 1 % of the frontier's
    runs stacked; the rotary turns every row of the stacked batch alike, and the
    scalar stacks as (K,)."""
    check_equivalence(tmp_path, "pre", norm, **model)


def test_member_matches_the_run_trained_alone_under_xiongs_scaled_embeddings(tmp_path, one_torch_thread):
    """The stacked forward scales the token embedding by √d as `embed` does (the xiong recipe)."""
    check_equivalence(tmp_path, "pre", "layernorm", init="xiong")


@pytest.mark.slow
@pytest.mark.parametrize("scheme,norm", ALL_COMBOS)
def test_member_matches_the_run_trained_alone_every_pair(tmp_path, one_torch_thread, scheme, norm):
    check_equivalence(tmp_path, scheme, norm)


def test_a_diverging_member_leaves_the_others_bit_identical(tmp_path, one_torch_thread):
    """lr 1e30 sends member 1's weights to inf after one step: its loss is NaN at step 2."""
    keep = [member(0, 3e-3, steps=20), member(2, 1e-3, steps=20)]
    bomb = member(1, 1e30, steps=20, grad_clip="off", warmup_steps=0)
    with_bomb = GroupTrainer([(keep[0], str(tmp_path / "a0")), (bomb, str(tmp_path / "a1")),
                              (keep[1], str(tmp_path / "a2"))]).run()
    without = GroupTrainer([(keep[0], str(tmp_path / "b0")), (keep[1], str(tmp_path / "b2"))]).run()
    assert [r.status for r in with_bomb] == ["completed", "diverged", "completed"]
    status = RunDir(tmp_path / "a1").read_status()
    assert status["status"] == "diverged" and "non-finite" in status["reason"] and status["nan_origin"]
    for a, b in (("a0", "b0"), ("a2", "b2")):
        assert without_timing(RunDir(tmp_path / a).metrics()) == without_timing(RunDir(tmp_path / b).metrics())
        assert diagnostics(tmp_path / a) == diagnostics(tmp_path / b)
    assert [r.val_loss for r in with_bomb[::2]] == [r.val_loss for r in without]


def test_a_killed_group_resumes_each_member_exactly(tmp_path, one_torch_thread):
    cfgs = [member(s, lr, steps=16) for s, lr in ((0, 3e-3), (1, 1e-3), (2, 2e-3))]
    whole = GroupTrainer([(c, str(tmp_path / f"w{i}")) for i, c in enumerate(cfgs)]).run()

    class Kill(Exception):
        pass

    def kill_at_step_10(i, row):
        if row["step"] == 10:
            raise Kill

    with pytest.raises(Kill):
        GroupTrainer([(c, str(tmp_path / f"k{i}")) for i, c in enumerate(cfgs)], on_log=kill_at_step_10).run()
    assert RunDir(tmp_path / "k0").read_status()["status"] == "failed"
    resumed = GroupTrainer([(c, str(tmp_path / f"k{i}")) for i, c in enumerate(cfgs)]).run()
    assert [r.val_loss for r in resumed] == [r.val_loss for r in whole]
    for i in range(3):
        assert RunDir(tmp_path / f"k{i}").read_meta()["resumed_from_step"] == 8
        assert without_timing(RunDir(tmp_path / f"k{i}").metrics()) == \
            without_timing(RunDir(tmp_path / f"w{i}").metrics())


def test_a_member_checkpoint_resumes_alone(tmp_path, one_torch_thread):
    """A member's checkpoint is a single run's (model, AdamW state, RNG, data position)."""
    cfg = member(0, 3e-3, steps=16, ckpt_interval=8)
    GroupTrainer([(cfg, str(tmp_path / "g")), (member(1, 1e-3, steps=16, ckpt_interval=8), str(tmp_path / "o"))]).run()
    train(cfg, str(tmp_path / "alone"))
    state = RunDir(tmp_path / "g").load_checkpoint()
    alone = RunDir(tmp_path / "alone").load_checkpoint()
    assert state["step"] == 16 and state.keys() == alone.keys()
    assert state["optimizer"]["param_groups"] == alone["optimizer"]["param_groups"]
    assert state["optimizer"]["state"].keys() == alone["optimizer"]["state"].keys()
    # rewind the member to its step-8 checkpoint and let a single Trainer finish it
    run = RunDir(tmp_path / "g")
    (run.path / "checkpoint.prev.pt").replace(run.path / "checkpoint.pt")
    run.write_status("running", step=8)
    train(cfg, str(tmp_path / "g"))
    assert_same_run(tmp_path / "g", tmp_path / "alone")


def test_members_resumed_at_different_steps_train_as_separate_stacks(tmp_path, one_torch_thread):
    a, b = member(0, 3e-3, steps=12), member(1, 1e-3, steps=12)
    train(a.model_copy(update={"train": a.train.model_copy(update={"steps": 12})}), str(tmp_path / "a"))
    RunDir(tmp_path / "a").write_status("running", step=12)  # as if killed after its last checkpoint
    results = GroupTrainer([(a, str(tmp_path / "a")), (b, str(tmp_path / "b"))]).run()
    assert [r.status for r in results] == ["completed", "completed"]
    train(b, str(tmp_path / "b_alone"))
    assert_same_run(tmp_path / "b", tmp_path / "b_alone")


def test_group_key_ignores_only_member_settings():
    base = member(0, 3e-3)
    assert group_key(base) == group_key(member(5, 1e-2, warmup_steps=0, weight_decay=0.0, grad_clip="off"))
    assert group_key(base) != group_key(member(0, 3e-3, "post"))
    assert group_key(base) != group_key(member(0, 3e-3, batch_size=8))
    with pytest.raises(ValueError, match="share every setting"):
        GroupTrainer([(base, "x"), (member(0, 3e-3, "post"), "y")])
