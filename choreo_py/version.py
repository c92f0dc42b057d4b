"""The package version: one module below every other, so that what records it (the kernel
cache's compiler version) need not import the package's face."""
__version__ = "0.1.0"
