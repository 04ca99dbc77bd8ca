"""The errors a user's input raises, in a module that imports nothing: the command line catches them without
importing torch, which `normlab --help` never needs (`benchmarks/cli_startup.py`)."""


class ConfigError(ValueError):
    """A config that cannot be used; the message says which key and what is valid."""


class CorpusError(ValueError):
    """A corpus that cannot be used: missing, unreadable, empty or too short."""
