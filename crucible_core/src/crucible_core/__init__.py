"""crucible-core: the contract, the manifest, the keep/discard loop and the plugin surface."""

# The single source of the version (pyproject reads it through hatch); a literal, because
# asking importlib.metadata costs tens of milliseconds on every `crucible` start.
__version__ = "0.1.0"

__all__ = ["__version__"]
