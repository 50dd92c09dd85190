"""Pure data: label keys, names, the ClusterPolicy with its defaults and validation, snapshots.

Nothing in this package does I/O, reads a clock or imports a Kubernetes client;
the import-linter contract in pyproject.toml enforces it.
"""
