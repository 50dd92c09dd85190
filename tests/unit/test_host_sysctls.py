"""We test these aspects of the pre-apply check of pod sysctls against the host namespaces an
operand's pods share (`model/api_values.host_sysctl_problem`; found in session 5: a policy with
`daemonsets.podSecurityContext.sysctls` and `dcgm.hostNetwork: true` got an API 422 on nvidia-dcgm):

- which kernel namespace a sysctl belongs to, as the API server tells them apart (names and
  prefixes, `/` as the separator, unknown ones);
- for every generic operand, with and without `dcgm.hostNetwork`: a network sysctl on DCGM with
  hostNetwork, an IPC sysctl on the MIG manager (always hostIPC) are errors naming both fields,
  every sysctl at fault and the fix; every other combination passes;
- the table of shared host namespaces agrees with what every operand's template renders
  (hostNetwork, hostIPC), so a new template that shares one cannot slip past the check;
- the reconciler's twin, `ocp-gpu render`, holds back only that operand and reports the problem.
"""

from __future__ import annotations

from typing import Any

import pytest

from ocp_gpu.model import operand_types
from ocp_gpu.model.images import ImageRef
from ocp_gpu.model.policy import api_values, policy_parser
from ocp_gpu.rendering import templating
from ocp_gpu.rendering.operands import operand_catalog, operand_common, operand_rendering

SYSCTLS = "spec.daemonsets.podSecurityContext.sysctls"

NAMESPACES = {
    "net.ipv4.ip_local_port_range": api_values.NET,
    "net.core.somaxconn": api_values.NET,
    "net/ipv4/ip_forward": api_values.NET,
    "net.ipv4.conf.eno2/100.rp_filter": api_values.NET,
    "kernel.shm_rmid_forced": api_values.IPC,
    "kernel.shmmax": api_values.IPC,
    "kernel.msgmnb": api_values.IPC,
    "kernel.sem": api_values.IPC,
    "fs.mqueue.msg_max": api_values.IPC,
    "kernel/shm_rmid_forced": api_values.IPC,
    "kernel.domainname": None,
    "vm.swappiness": None,
    "kernel.shm_rmid_forced_not": None,
    "net": None,
    "fs.file-max": None,
}


@pytest.mark.parametrize(("name", "space"), NAMESPACES.items(), ids=NAMESPACES.keys())
def test_the_namespace_of_a_sysctl(name: str, space: str | None) -> None:
    assert api_values.sysctl_namespace(name) == space


def policy(*sysctls: str, host_network: bool = False) -> Any:
    return policy_parser.parse_policy(
        {
            "daemonsets": {"podSecurityContext": {"sysctls": [{"name": n, "value": "1"} for n in sysctls]}},
            "dcgm": {"enabled": True, "hostNetwork": host_network},
            "migManager": {"enabled": True},
        }
    )


def check(operand: operand_types.Operand, spec: Any) -> api_values.PolicyProblem | None:
    return api_values.host_sysctl_problem(
        spec, operand.daemonset, operand_rendering.shared_host_namespaces(operand, spec)
    )


# (sysctls, dcgm.hostNetwork) -> the operand held back, or None
CASES = {
    "net-with-host-network": (("net.ipv4.ip_local_port_range",), True, operand_catalog.DCGM),
    "net-without-host-network": (("net.ipv4.ip_local_port_range",), False, None),
    "ipc-with-host-network": (("kernel.shm_rmid_forced",), True, operand_catalog.MIG_MANAGER),
    "ipc-without-host-network": (("kernel.shm_rmid_forced",), False, operand_catalog.MIG_MANAGER),
    "unknown-namespace": (("vm.swappiness",), True, None),
    "none": ((), True, None),
}


@pytest.mark.parametrize(("sysctls", "host_network", "held"), CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("operand", operand_catalog.GENERIC, ids=lambda o: o.name)
def test_only_a_clashing_operand_is_held_back(
    operand: operand_types.Operand,
    sysctls: tuple[str, ...],
    host_network: bool,
    held: operand_types.Operand | None,
) -> None:
    problem = check(operand, policy(*sysctls, host_network=host_network))
    assert (problem is not None) == (operand is held)


def test_dcgm_with_host_network_names_both_fields_every_sysctl_and_the_fix() -> None:
    spec = policy("vm.swappiness", "net.ipv4.ip_local_port_range", "net.core.somaxconn", host_network=True)
    problem = check(operand_catalog.DCGM, spec)
    assert problem is not None
    # the first sysctl at fault; the message names every one, and the other field
    assert problem.field == f"{SYSCTLS}[1].name"
    assert "'net.ipv4.ip_local_port_range', 'net.core.somaxconn'" in problem.message
    assert "vm.swappiness" not in problem.message
    assert "spec.dcgm.hostNetwork is true" in problem.message and "nvidia-dcgm" in problem.message
    assert SYSCTLS in problem.fix and "spec.dcgm.hostNetwork: false" in problem.fix
    assert problem.severity is api_values.Severity.ERROR


def test_the_mig_manager_always_shares_ipc_so_the_fix_is_the_sysctl() -> None:
    problem = check(operand_catalog.MIG_MANAGER, policy("fs.mqueue.msg_max"))
    assert problem is not None
    assert problem.field == f"{SYSCTLS}[0].name"
    assert "nvidia-mig-manager always runs with hostIPC: true" in problem.message
    assert SYSCTLS in problem.fix and "false" not in problem.fix


@pytest.mark.parametrize("host_network", [False, True])
@pytest.mark.parametrize("operand", operand_catalog.GENERIC, ids=lambda o: o.name)
def test_the_table_agrees_with_the_templates(operand: operand_types.Operand, host_network: bool) -> None:
    spec = policy(host_network=host_network)
    inputs = operand_common.OperandRenderInputs("gpu-operator", True, ImageRef("example.com/operand:1"))
    (daemonset,) = [
        m for m in operand_rendering.render_operand(operand, spec, inputs) if m["kind"] == "DaemonSet"
    ]
    pod = daemonset["spec"]["template"]["spec"]
    rendered = {space for space, field in api_values.HOST_FIELD.items() if pod.get(field)}
    assert rendered == set(operand_rendering.shared_host_namespaces(operand, spec))


def test_the_driver_template_shares_neither_namespace() -> None:
    # The driver's DaemonSets are rendered apart (rendering/operands/driver_rendering.py): their
    # template is read.
    template = (templating.templates_dir() / "state-driver" / "0500_daemonset.yaml.j2").read_text()
    # NB: the host's network only with driver.hostNetwork (then a network sysctl is refused by the
    # API server when the DaemonSet is applied, and the driver reconciler reports that).
    assert "hostIPC" not in template
    assert template.count("hostNetwork") == 1
    assert "{% if ds.host_network %}\n      hostNetwork: true\n" in template
