"""normlab: where does the normalization go, and which one?

    >>> import normlab
    >>> model = normlab.build_model({"vocab_size": 65, "scheme": "pre", "norm": "rmsnorm"})
    >>> gpt2 = normlab.from_hf("path/to/a/local/gpt2")  # a Hugging Face directory as a normlab model
"""
from normlab.nn import GPT, NORMS, SCHEMES, ModelConfig, build_model, deepnorm_constants

__version__ = "0.1.0"
__all__ = ["GPT", "ModelConfig", "NORMS", "SCHEMES", "build_model", "deepnorm_constants", "from_hf", "__version__"]


def from_hf(path):
    """The normlab model of a local Hugging Face directory (normlab.hf.convert; needs `normlab[hf]`)."""
    from normlab.hf.convert import from_hf as convert

    return convert(path)
