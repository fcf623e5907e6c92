"""The crucible.toml manifest: attrs models, one strict cattrs converter, and the frozen loader."""
