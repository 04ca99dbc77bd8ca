"""normlab: where does the normalization go, and which one?

    >>> import normlab
    >>> model = normlab.build_model({"vocab_size": 65, "scheme": "pre", "norm": "rmsnorm"})
    >>> gpt2 = normlab.from_hf("path/to/a/local/gpt2")  # a Hugging Face directory as a normlab model

The model's names are read from `normlab.nn` when first used (PEP 562), so that `import normlab` (and the
command line's `normlab --help`) does not import torch before it is needed.
"""
from normlab.version import __version__

__all__ = ["GPT", "ModelConfig", "NORMS", "SCHEMES", "build_model", "deepnorm_constants", "from_hf", "__version__"]
_FROM_NN = ("GPT", "ModelConfig", "NORMS", "SCHEMES", "build_model", "deepnorm_constants")


def __getattr__(name: str):
    if name in _FROM_NN:
        import normlab.nn

        return getattr(normlab.nn, name)
    raise AttributeError(f"module 'normlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


def from_hf(path):
    """The normlab model of a local Hugging Face directory (normlab.hf.convert; needs `normlab[hf]`)."""
    from normlab.hf.convert import from_hf as convert

    return convert(path)
