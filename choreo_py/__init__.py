"""choreo-py: a compiler for Choreo tile kernels."""

__version__ = "0.1.0"
