"""The model: normalizers, placement schemes, attention, MLP, block, GPT."""
from normlab.nn.config import ModelConfig
from normlab.nn.model import GPT, build_model
from normlab.nn.norms import NORMS, make_norm
from normlab.nn.schemes import SCHEMES, Residual, Scheme, build_scheme, deepnorm_constants

__all__ = ["GPT", "ModelConfig", "NORMS", "SCHEMES", "Residual", "Scheme", "build_model",
           "build_scheme", "deepnorm_constants", "make_norm"]
