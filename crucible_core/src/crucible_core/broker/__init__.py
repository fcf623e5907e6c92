"""The broker: the tools a run hands its agent over MCP, the one output mediation point, and disclosure.

Everything here is transport-free; the MCP server that speaks these tools on the wire is the
crucible-plugin-broker-mcp distribution (see docs/broker.md and docs/architecture.md).
"""
