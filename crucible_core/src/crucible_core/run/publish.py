"""[publish].forge resolved to a registered publisher, before a run or a check creates anything.

Publishing itself (the run's kept commits as one mediated draft pull request) is the forge plugin's, done
from the lifecycle hooks (crucible-plugin-publish-github), each write admitted by the run's
broker; core only refuses a forge nobody installed, or a run without a broker to mediate the
writes, naming the distribution that provides it.
"""

from __future__ import annotations

from crucible_core.broker.declaration import BROKER_DISTRIBUTION
from crucible_core.broker.service import broker_installed
from crucible_core.errors import ManifestError, PluginError
from crucible_core.manifest.models import PublishSection
from crucible_core.plugins import Plugins
from crucible_core.protocols import Publisher
from crucible_core.registry import provider_of


def build_publisher(plugins: Plugins, section: PublishSection) -> Publisher:
    """The registered publisher `[publish].forge` names, or a ManifestError naming what is installed
    and, for a forge of the standard set, the distribution that provides it."""
    registry = plugins.registry("publisher")
    if section.forge not in registry:
        installed = ", ".join(registry.names()) or "none"
        provider = provider_of("publisher", section.forge)
        raise ManifestError(
            f"[publish].forge = {section.forge!r} is not an installed publisher (installed: {installed})",
            hint=f"pip install {provider}"
            if provider
            else "install the plugin that provides it (`crucible plugins` lists what is installed)",
        )
    if not broker_installed(plugins):  # publishing is a mediated write, and the broker mediates
        raise ManifestError(
            f"[publish] writes draft PRs through the output mediation point, which {BROKER_DISTRIBUTION} provides",
            hint=f"pip install {BROKER_DISTRIBUTION}, or remove [publish]",
        )
    publisher = registry.get(section.forge, where="[publish].forge")()
    if not isinstance(publisher, Publisher):
        raise PluginError(f"publisher {section.forge!r} does not have a publish(request) method")
    return publisher
