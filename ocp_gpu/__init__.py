"""ocp-gpu: an OpenShift-first NVIDIA GPU operator."""

__version__ = "0.1.0"
