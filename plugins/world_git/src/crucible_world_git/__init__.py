"""crucible-plugin-world-git: GitWorld and CommandWorld on dulwich."""
