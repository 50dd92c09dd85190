"""Manifests from templates: the only user of jinja2.

Templates live in `templates/state-<component>/NNNN_<kind>.yaml.j2` at the top of
the repository, numbered in apply order.  Rendering is pure (context in, manifest
dicts out) and injection-proof: every `{{ value }}` is emitted as a JSON value,
which is YAML, so no string from a ClusterPolicy or the cluster can add structure.
"""
