"""Hugging Face model directories, read locally and safely: normlab models built from them (`from_hf`), and
normlab runs written back in their layouts. `transformers` is needed only to compare against and to export
configs; reading a checkpoint needs only `safetensors` (or torch's weights-only unpickler)."""
