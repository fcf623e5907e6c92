"""crucible-core: the contract, the manifest, the keep/discard loop and the plugin surface."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("crucible-core")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
