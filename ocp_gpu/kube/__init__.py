"""The only code that talks to the Kubernetes API (through our own client, `sending.ApiClient`).

Modules here read the cluster into plain model data and apply plans; they
decide nothing.  Client objects never leave this package.
"""
