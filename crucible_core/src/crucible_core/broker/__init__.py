"""The broker's seam and what a run declares: output bounds, granted tools, disclosure.

The broker itself (tool dispatch, per-turn grants, the one output mediation point) and the MCP
server that serves its tools are the crucible-plugin-broker-mcp distribution; core resolves the
declaration and asks `crucible_open_broker` for a run's broker (see docs/broker.md and
docs/architecture.md).
"""
