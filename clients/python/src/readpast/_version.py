"""The version of the readpast Python client."""

__version__ = "0.1.0"
