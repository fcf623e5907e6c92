"""Build hook: ship the repository's user guides (docs/*.md) inside the crucible-core wheel.

The guides live once, at the repository root, for readers of the clone; `crucible help` reads
them from the package. A wheel built from the clone takes ../docs; an sdist carries them as
docs/ so a wheel built from the sdist finds them there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class DocsHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        docs = next((d for d in (root.parent / "docs", root / "docs") if d.is_dir()), None)
        if docs is None:
            raise RuntimeError(f"no docs/ directory next to {root}: the guides cannot be packaged")
        if self.target_name == "sdist":
            build_data["force_include"][str(docs)] = "docs"
        elif version != "editable":  # an editable install reads the clone's docs/ in place
            build_data["force_include"][str(docs)] = "crucible_core/docs"
