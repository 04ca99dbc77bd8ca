"""normlab: where does the normalization go, and which one?

    >>> import normlab
    >>> model = normlab.build_model({"vocab_size": 65, "scheme": "pre", "norm": "rmsnorm"})
"""
from normlab.nn import GPT, NORMS, SCHEMES, ModelConfig, build_model, deepnorm_constants

__version__ = "0.1.0"
__all__ = ["GPT", "ModelConfig", "NORMS", "SCHEMES", "build_model", "deepnorm_constants", "__version__"]
