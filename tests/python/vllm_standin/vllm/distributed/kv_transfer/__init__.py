"""Stand-in of vLLM for pikv tests: only the connector interface (see README.md)."""
