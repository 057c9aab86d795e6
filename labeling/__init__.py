"""Human validation of machine-classified scholarly works."""

__version__ = "0.1.0"
