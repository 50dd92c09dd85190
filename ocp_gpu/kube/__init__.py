"""The only code that talks to the Kubernetes API (through the `kubernetes` client).

Modules here read the cluster into plain model data and apply plans; they
decide nothing.  Client objects never leave this package.
"""
