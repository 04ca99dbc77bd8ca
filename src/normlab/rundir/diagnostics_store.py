"""Per-layer diagnostics on disk: one SQLite table in the run directory, `DIR/diagnostics.sqlite`.

    layer_metrics(step INTEGER, layer INTEGER, site TEXT, metric TEXT, head INTEGER, value REAL)

- step: optimizer steps completed when measured (0 = the untrained model; gradients
  at step s are those of the update that takes the model from s to s+1).
- layer: 0-based block index; NULL for model-level values (logits, the final stream).
- site: `block`, `attn`, `mlp` (the residual branches), a parameter name relative to the
  block (`attn.sublayer.qkv.weight`), or `model`.
- metric: see `METRICS`. head: the attention head for per-head metrics, else NULL.

Example: `sqlite3 DIR/diagnostics.sqlite "SELECT layer, value FROM layer_metrics
WHERE step = 0 AND site = 'block' AND metric = 'grad_norm' ORDER BY layer"`.
"""
from __future__ import annotations

import math
import sqlite3
from pathlib import Path

METRICS = {
    "residual_rms": "RMS of the residual stream entering the block (site block) or sub-layer (attn, mlp)",
    "branch_rms": "RMS of the sub-layer's contribution F (after its out-norm, before the add)",
    "contribution_ratio": "‖F‖/‖x‖: the branch next to the stream x entering the sub-layer (before DeepNorm's α; "
                          "site attn/mlp); ‖x_out − x_in‖/‖x_in‖ for the whole block (site block)",
    "cosine": "mean over tokens of cos(x_l, x_{l+1})",
    "angular_distance": "mean over tokens of arccos(cos(x_l, x_{l+1}))/π",
    "block_influence": "1 − mean cos(block input, block output) (ShortGPT)",
    "attn_entropy": "mean entropy (nats) of a head's causal attention distribution",
    "attn_max_logit": "max pre-softmax attention logit of a head",
    "grad_norm": "gradient norm of a parameter, a branch (attn/mlp) or the block, before clipping",
    "weight_norm": "Frobenius norm of a parameter, a branch or the block",
    "update_ratio": "‖ΔW‖/‖W‖ of the optimizer step (parameter, branch or block)",
    "final_stream_rms": "RMS of the stream just before the final norm (layer NULL)",
    "logits_rms": "RMS of the output logits (layer NULL)",
    "logits_max": "max output logit (layer NULL)",
    "log_partition": "mean over tokens of log Σ exp(logits) (layer NULL)",
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS layer_metrics (
    step INTEGER NOT NULL, layer INTEGER, site TEXT NOT NULL, metric TEXT NOT NULL,
    head INTEGER, value REAL
);
CREATE INDEX IF NOT EXISTS layer_metrics_by_metric ON layer_metrics (metric, step, layer);
"""

Row = tuple[int, int | None, str, str, int | None, float]


class DiagnosticsStore:
    """Append-only per-layer metrics; `truncate` drops what a resumed run will measure again."""

    FILENAME = "diagnostics.sqlite"

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / self.FILENAME
        self.on_write = None  # called with each measured step's rows once stored (live TensorBoard events)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def write(self, rows: list[Row]) -> None:
        clean = [(s, l, site, m, h, v if v is not None and math.isfinite(v) else None)
                 for s, l, site, m, h, v in rows]
        with self._connect() as db:  # one transaction per measured step
            db.executemany("INSERT INTO layer_metrics VALUES (?, ?, ?, ?, ?, ?)", clean)
        if self.on_write is not None:
            self.on_write(clean)

    def rows(self) -> list[Row]:
        """Every stored row (step, layer, site, metric, head, value), in step order."""
        with self._connect() as db:
            return db.execute("SELECT * FROM layer_metrics ORDER BY step, rowid").fetchall()

    def truncate(self, after_step: int) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM layer_metrics WHERE step > ?", (after_step,))

    def query(self, metric: str, site: str = "block", step: int | None = None) -> dict[int, list[float | None]]:
        """{step: [value per layer]} of one metric at one site (per-head metrics: mean over heads)."""
        sql = ("SELECT step, layer, AVG(value) FROM layer_metrics WHERE metric = ? AND site = ?"
               + (" AND step = ?" if step is not None else "") + " GROUP BY step, layer ORDER BY step, layer")
        args = (metric, site) + ((step,) if step is not None else ())
        out: dict[int, list[float | None]] = {}
        with self._connect() as db:
            for s, layer, value in db.execute(sql, args):
                out.setdefault(s, []).append(value)
        return out

    def steps(self) -> list[int]:
        with self._connect() as db:
            return [s for (s,) in db.execute("SELECT DISTINCT step FROM layer_metrics ORDER BY step")]
