"""The protocols' records defined on first use (protocol_records.py) are the protocols' own names."""

from __future__ import annotations

from tests.fresh_interpreter import json_printed_by


def test_the_protocol_records_defined_on_first_use_are_the_protocols_names() -> None:
    """Five records live in protocol_records.py and are asked for through protocols (and the API):
    importing protocols leaves them out, and each name then resolves to the one class."""
    found = json_printed_by(
        """
        import json, sys
        from crucible_core import protocols
        loaded_at_import = "crucible_core.protocol_records" in sys.modules
        from crucible_core.api import SandboxLayout
        from crucible_core.protocols import PublishRequest, SandboxCommand, ServedTool, ShellStdin
        from crucible_core import protocol_records as records
        names = sorted(protocols._RECORDS_ELSEWHERE)
        same = [getattr(records, name) is getattr(protocols, name) for name in names]
        try:
            protocols.NoSuchRecord
            missing = "found"
        except AttributeError as exc:
            missing = str(exc)
        print(json.dumps({
            "loaded_at_import": loaded_at_import,
            "names": names,
            "same": same,
            "layout": SandboxLayout is records.SandboxLayout,
            "stdin": ShellStdin(b"x").data.decode(),
            "missing": missing,
        }))
        """
    )
    assert found == {
        "loaded_at_import": False,
        "names": ["PublishRequest", "SandboxCommand", "SandboxLayout", "ServedTool", "ShellStdin"],
        "same": [True] * 5,
        "layout": True,
        "stdin": "x",
        "missing": "module 'crucible_core.protocols' has no attribute 'NoSuchRecord'",
    }
