"""The SDK's version (read by the build backend in _build/)."""

__version__ = "0.1.0"
