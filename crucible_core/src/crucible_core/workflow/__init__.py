"""Authored workflows: a manifest's `[workflow]` IR document, written as tables or compiled by a language plugin."""
