"""The lanes: what differs between the kinds of run (the loop; a plugin's, such as the playbook or a plan file), each a session body."""
