"""normlab's version, on the lowest floor: a run directory, an import's record and the package face read it
from here (a module that imports the package face for it would close a loop through `normlab/__init__`)."""
__version__ = "0.1.0"
