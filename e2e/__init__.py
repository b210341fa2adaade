"""End-to-end checks against real tracing backends (`make e2e`); not part of `make test`."""
