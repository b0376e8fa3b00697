"""Chronicle's Python SDK (HTTP only, no Django)."""

__version__ = "0.1.0"
