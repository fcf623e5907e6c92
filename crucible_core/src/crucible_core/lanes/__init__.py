"""The lanes: what differs between the kinds of run (the loop, a playbook, a plan file), each a session body."""
