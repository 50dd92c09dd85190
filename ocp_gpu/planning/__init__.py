"""Pure decisions: (snapshot, policy, now) -> plan.

Nothing in this package does I/O, reads a clock or imports a Kubernetes client;
the import-linter contract in pyproject.toml enforces it.
"""
