"""Encoders and encoder–decoders: every placement × normalizer builds and trains in all three architectures,
decoders stay causal, encoders see both ways, DeepNorm uses each stack's constants, and the objectives mask
what they say they mask."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

from normlab.data import load_corpus
from normlab.data.objectives import IGNORE, Denoising, MaskedLM, objective_for
from normlab.nn.config import ModelConfig
from normlab.nn.model import EncoderDecoder, GPT, build_model
from normlab.nn.norms import NORMS
from normlab.nn.schemes import ARCHITECTURES, SCHEMES, Residual, deepnorm_constants

ARCHS = ("decoder", "encoder", "encoder-decoder")
TEXT_VOCAB = 13


def tiny(arch, scheme="pre", norm="layernorm", **kw) -> ModelConfig:
    special = objective_for(arch, TEXT_VOCAB).n_special
    return ModelConfig(vocab_size=TEXT_VOCAB + special, block_size=12, n_layer=2, n_head=2, d_model=16,
                       arch=arch, scheme=scheme, norm=norm, **kw)


class _Corpus:
    """A corpus stand-in: random tokens of the text vocabulary (the objectives only call `batch`)."""

    def __init__(self):
        self.train = torch.randint(TEXT_VOCAB, (4000,), generator=torch.Generator().manual_seed(0))

    def batch(self, split, batch_size, block_size, generator):
        starts = torch.randint(len(self.train) - block_size, (batch_size,), generator=generator)
        x = self.train[starts[:, None] + torch.arange(block_size)]
        return x, self.train[starts[:, None] + torch.arange(block_size) + 1]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("scheme, norm", list(itertools.product(SCHEMES.names(), NORMS.names())))
def test_every_scheme_and_normalizer_builds_and_trains_in_every_architecture(arch, scheme, norm):
    if undefined(scheme, arch):  # a placement its paper does not define there: refused in one line, first
        with pytest.raises(ValueError, match=f"scheme '{scheme}' is not defined for an? {ARCHITECTURES[arch]} model: "):
            build_model(tiny(arch, scheme, norm))
        return
    if SCHEMES.get(scheme).norm_refusal(norm):
        with pytest.raises(ValueError, match="cannot be used with"):
            tiny(arch, scheme, norm)
        return
    torch.manual_seed(0)
    model = build_model(tiny(arch, scheme, norm))
    objective = objective_for(arch, TEXT_VOCAB)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(3):
        x, y = objective.batch(_Corpus(), "train", 4, 12, g)
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses), losses
    assert all(p.grad is None for p in model.parameters())  # zero_grad(set_to_none) after the step


def undefined(scheme: str, arch: str) -> str | None:
    """Why `scheme` is refused in `arch` (its paper does not define it there), or None."""
    return SCHEMES.get(scheme).facts.undefined_architectures.get(ARCHITECTURES[arch])


def test_the_refused_architectures_are_the_declared_ones():
    refused = {(s, a) for s in SCHEMES.names() for a in ARCHS if undefined(s, a)}
    assert refused == {("parallel", "encoder-decoder"), ("hybrid", "encoder-decoder"), ("keel", "encoder-decoder"),
                       ("ngpt", "encoder"), ("ngpt", "encoder-decoder"), ("hc", "encoder-decoder"),
                       ("mhc", "encoder-decoder"), ("attnres", "encoder-decoder"), ("spannorm", "encoder-decoder")}


def _logits(model, x, y=None):
    """Logits in eval mode (an encoder–decoder's decoder reads BOS + y[:-1])."""
    with torch.no_grad():
        return model.eval()(x, y)[0]


BUILDABLE = [(s, n) for s, n in itertools.product(SCHEMES.names(), NORMS.names())
             if not SCHEMES.get(s).norm_refusal(n) and not undefined(s, "encoder")]


@pytest.mark.parametrize("scheme, norm", BUILDABLE)
def test_encoders_are_bidirectional_and_decoders_causal(scheme, norm):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(TEXT_VOCAB, (2, 12), generator=g)
    late = x.clone()
    late[:, 8:] = (late[:, 8:] + 1) % TEXT_VOCAB  # change every token from position 8 on
    # encoder: positions before 8 see the change
    enc = build_model(tiny("encoder", scheme, norm))
    assert (_logits(enc, late)[:, :8] - _logits(enc, x)[:, :8]).abs().max() > 0  # deterministic: any change is real
    # decoder: they do not (and position 8 does: the check can fail)
    dec = build_model(tiny("decoder", scheme, norm))
    assert (_logits(dec, late)[:, :8] - _logits(dec, x)[:, :8]).abs().max() == 0.0
    assert (_logits(dec, late)[:, 8] - _logits(dec, x)[:, 8]).abs().max() > 1e-4
    if undefined(scheme, "encoder-decoder"):
        return
    # encoder–decoder: the decoder is causal in its targets, and reads the whole source
    ed = build_model(tiny("encoder-decoder", scheme, norm))
    src = torch.randint(TEXT_VOCAB, (2, 12), generator=g)
    before, after = _logits(ed, src, x), _logits(ed, src, late)
    # target position t is predicted from targets < t: changing targets ≥ 8 moves positions ≥ 9 only
    assert (after[:, :9] - before[:, :9]).abs().max() == 0.0
    assert (after[:, 9] - before[:, 9]).abs().max() > 1e-4
    late_src = src.clone()
    late_src[:, 8:] = (late_src[:, 8:] + 1) % TEXT_VOCAB
    assert (_logits(ed, late_src, x)[:, :8] - before[:, :8]).abs().max() > 0  # deterministic: any change is real


@pytest.mark.parametrize("N, M", [(6, 6), (12, 3), (24, 100)])
def test_deepnorm_uses_each_architectures_constants(N, M):
    cases = [("encoder", {"encoder": deepnorm_constants("encoder-only", n_encoder=N)["encoder"]}, {}),
             ("decoder", {"decoder": deepnorm_constants("decoder-only", n_decoder=N)["decoder"]}, {}),
             ("encoder-decoder", deepnorm_constants("encoder-decoder", n_encoder=N, n_decoder=M), {"n_dec_layer": M})]
    for arch, want, extra in cases:
        torch.manual_seed(0)
        cfg = ModelConfig(vocab_size=20, block_size=8, n_layer=N, n_head=2, d_model=64, arch=arch,
                          scheme="deepnorm", **extra)
        model = build_model(cfg)
        for part, constants in want.items():
            blocks = [b for i, b in enumerate(model.blocks) if model.stack_of(i) == part]
            alphas = {r.alpha for b in blocks for r in b.modules() if isinstance(r, Residual)}
            assert len(alphas) == 1 and alphas.pop() == pytest.approx(constants["alpha"], rel=1e-12), (arch, part)
            v = torch.cat([w.flatten() for b in blocks for r in b.sublayers()
                           for role, w in r.sublayer.projections() if role == "v"])
            assert v.std().item() / math.sqrt(2 / 128) == pytest.approx(constants["beta"], rel=0.05), (arch, part)
        record = model.init_record["scheme_override"]
        if arch == "encoder-decoder":
            assert record["encoder"]["gain_v_out_ffn"] == pytest.approx(want["encoder"]["beta"])
            assert record["decoder"]["gain_v_out_ffn"] == pytest.approx(want["decoder"]["beta"])
            assert model.init_record["schemes"]["encoder"]["alpha"] == pytest.approx(want["encoder"]["alpha"])
        else:
            assert record["gain_v_out_ffn"] == pytest.approx(next(iter(want.values()))["beta"])


def test_encoder_decoder_stacks_have_their_depths_and_cross_attention():
    model = build_model(tiny("encoder-decoder", n_dec_layer=3))
    assert isinstance(model, EncoderDecoder) and len(model.encoder) == 2 and len(model.decoder) == 3
    assert all(b.cross is None for b in model.encoder) and all(b.cross is not None for b in model.decoder)
    assert [model.stack_of(i) for i in range(5)] == ["encoder"] * 2 + ["decoder"] * 3
    assert isinstance(build_model(tiny("encoder")), GPT)
    with pytest.raises(ValueError, match="n_dec_layer .* is for arch = 'encoder-decoder'"):
        tiny("decoder", n_dec_layer=2)
    with pytest.raises(ValueError, match="arch"):
        ModelConfig(arch="seq2seq")


def test_post_ln_wraps_cross_attention_like_any_sub_layer():
    """No `if arch` in a scheme: cross-attention gets the same slots as attention (Post-LN: a post norm)."""
    block = build_model(tiny("encoder-decoder", "post")).decoder[0]
    assert type(block.cross.post_norm).__name__ == type(block.attn.post_norm).__name__ != "Identity"
    pre = build_model(tiny("encoder-decoder", "pre")).decoder[0]
    assert type(pre.cross.in_norm).__name__ != "Identity" and type(pre.cross.post_norm).__name__ == "Identity"


def test_masked_lm_masks_15_percent_80_10_10_and_scores_only_those():
    corpus = load_corpus(None, block_size=64)
    obj = MaskedLM(corpus.tokenizer.vocab_size)
    x, y = obj.batch(corpus, "train", 256, 64, torch.Generator().manual_seed(0))
    scored = y != IGNORE
    assert scored.float().mean().item() == pytest.approx(0.15, abs=0.01)
    as_mask = (x == obj.mask_id) & scored
    kept = (x == y) & scored
    assert as_mask.sum() / scored.sum() == pytest.approx(0.8, abs=0.02)
    assert kept.sum() / scored.sum() == pytest.approx(0.1 + 0.1 / 65, abs=0.02)  # kept, or replaced by itself
    assert not ((x == obj.mask_id) & ~scored).any()  # MASK only where scored
    x2, y2 = obj.batch(corpus, "train", 256, 64, torch.Generator().manual_seed(0))
    assert torch.equal(x, x2) and torch.equal(y, y2)  # the run's generator decides everything


def test_denoising_masks_spans_and_reconstructs_the_window():
    corpus = load_corpus(None, block_size=64)
    obj = Denoising(corpus.tokenizer.vocab_size)
    window, _ = corpus.batch("train", 256, 64, torch.Generator().manual_seed(0))
    source, target = obj.batch(corpus, "train", 256, 64, torch.Generator().manual_seed(0))
    assert torch.equal(target, window) and source.shape == target.shape
    masked = source == obj.mask_id
    assert masked.float().mean().item() == pytest.approx(1 - 0.95 ** 3, abs=0.015)
    assert torch.equal(source[~masked], target[~masked])
    # spans: a masked position's run of masks is at least 3 long unless it touches the window's end
    runs = []
    for row in masked.tolist():
        at = 0
        for k, g in itertools.groupby(row):
            n = len(list(g))
            if k and at + n < len(row):  # a run cut by the window's end may be shorter
                runs.append(n)
            at += n
    assert min(runs) >= 3 and max(runs) >= 6  # spans of 3, and overlapping ones merge
    # a model that learned token frequencies and nothing else guesses every target by them, source or not
    assert obj.plateau(corpus) == pytest.approx(corpus.unigram_cross_entropy())
