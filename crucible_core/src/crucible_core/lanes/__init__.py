"""The lanes: what differs between the kinds of run (the loop, a plan file; a plugin's, such as the playbook), each a session body."""
