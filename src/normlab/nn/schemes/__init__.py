"""Normalization placement schemes, looked up by name in `SCHEMES`.

Every scheme is one class, its maths: which norm slots a sub-layer gets, the
residual multiplier α, the init gains, whether there is a final norm (and an
embedding norm). What others read of it is a small `Facts` object beside it:
the report's colour, how `normlab diagnose` recognises it (`layout`), and the
config's rules (which normalizers and architectures it refuses, the settings
its paper fixes, whether it stacks). The block and the trainer only ever call
`scheme.residual()`, telling it which sub-layer it wraps, and
`scheme.init_gains()`.

All schemes are special cases of one residual wrapper (`Residual`):

    x ← PostNorm( α·x + OutNorm( F( s·InNorm(x) ) ) )

with absent slots being identities and α = s = 1 unless a scheme says otherwise; the residual designs of 2026
generalize the state it reads and writes (n streams, a stack of sources: `normlab.nn.residual`).

The schemes live by family, registered in this order (their order in every list): `classic` (Post-LN to Sub-LN),
`forms` (Admin to Keel), `ngpt`, `streams` (hyper-connections to SpanNorm); what every scheme is, in `base`.
"""
from normlab.nn.residual import Residual
from normlab.nn.schemes.base import (ARCHITECTURES, NO_NORM_COLLAPSES, SCHEMES, BlockLayout, Facts, InitGains, Layout,
                                     NormFactory, Role, Scheme, Stack, build_scheme)
from normlab.nn.schemes.classic import (DeepNorm, LayerNormScaling, MixLN, PeriLN, PostLN, PreLN, SandwichLN, SubLN,
                                        deepnorm_constants)
from normlab.nn.schemes.forms import (Admin, AdminResidual, Branch, HybridNorm, Keel, Parallel, ReorderedNorm,
                                      ResiDual, calibrate, profile_model)
from normlab.nn.schemes.ngpt import NGPT, SphereResidual
from normlab.nn.schemes.streams import AttentionResiduals, HyperConnections, ManifoldHyperConnections, SpanNorm

__all__ = ["ARCHITECTURES", "NO_NORM_COLLAPSES", "SCHEMES", "Admin", "AdminResidual", "AttentionResiduals", "BlockLayout",
           "Branch", "DeepNorm", "Facts", "HybridNorm", "HyperConnections", "InitGains", "Keel", "Layout",
           "LayerNormScaling", "ManifoldHyperConnections", "MixLN", "NGPT", "NormFactory", "Parallel", "PeriLN",
           "PostLN", "PreLN", "ReorderedNorm", "ResiDual", "Residual", "Role", "SandwichLN", "Scheme", "SpanNorm",
           "SphereResidual", "Stack", "SubLN", "build_scheme", "calibrate", "deepnorm_constants", "profile_model"]
