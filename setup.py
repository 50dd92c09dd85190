"""What pyproject.toml cannot say: the operand templates live at the repository's top level
(`templates/`, beside `bundle/` and `charts/`, where reviewers compare them with NVIDIA's
`assets/`), yet ship inside the package as `ocp_gpu/templates/` so an installed wheel and the
image render without a checkout (`rendering/templating.templates_dir()` finds either)."""

from setuptools import find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages(include=["ocp_gpu", "ocp_gpu.*"]), "ocp_gpu.templates"],
    package_dir={"ocp_gpu.templates": "templates"},
)
