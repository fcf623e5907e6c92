"""The flow explainer: fold a session log into a small flow model and render it (json, dot, mmd, html)."""
