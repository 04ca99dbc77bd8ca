"""Diagnostics: per-layer metrics during training, layer-skip ablation, NaN origin,
static checks, and `normlab diagnose` for normlab runs and Hugging Face models.

Diagnostics observe and never edit the model's math.
"""
from normlab.diagnostics.nan import find_nonfinite_origin
from normlab.diagnostics.probe import LayerProbe
from normlab.diagnostics.skip import layer_skip, skipped
from normlab.rundir.diagnostics_store import METRICS, DiagnosticsStore

__all__ = ["METRICS", "DiagnosticsStore", "LayerProbe", "find_nonfinite_origin", "layer_skip", "skipped"]
