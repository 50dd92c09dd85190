"""What the operator would apply for one view of the cluster: plan, then render.

Pure like planning/ (no I/O, no clock), but above kube/ and rendering/ because it
uses both: kube.reading's converters turn the raw objects of the view into records,
rendering/ turns the plan into manifests.  Shared by the reconcilers (which apply
the result) and `ocp-gpu render` (which prints it).
"""
