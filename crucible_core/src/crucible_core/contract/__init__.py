"""The pure contract: readings, the decide rule, the session wire; no I/O, imports nothing of ours."""
