"""What drives the servers under test: HTTP and watch clients, replaying ListerWatchers, the
soaks' kubectl and writers, probes."""
