"""What the daemon is compared with: a dict of parsed dicts, a naive server, the socket floor, a
bare broadcaster."""
