"""crucible-harness-endpoint: what the opencode and pi harnesses share.

Both CLIs exist in crucible for one reason, an inference endpoint that speaks only OpenAI Chat
Completions, and both are driven the same way: the endpoint the turn's environment names is
seeded into the CLI's own provider table as provider `crucible` when the turn starts (in the
turn's environment, so a sandbox or a pod whose key arrives there works too), the CLI runs
with a home of its own and every outside reach turned off, and the turn is priced from the
token usage it reports. This library holds those shared pieces; each harness plugin holds its
CLI's argv, config format and stream. It registers nothing, so it is not a plugin.
"""
