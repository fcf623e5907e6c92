"""Operator control of a live run: the loopback bridge, its wire commands, the inbox the loop drains, the client."""
