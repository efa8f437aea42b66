"""The version of convkit, in one place for the package and its dispatch tables."""

__version__ = "0.1.0"
