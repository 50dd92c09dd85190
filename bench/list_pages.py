"""What the page size of a watch's initial LIST leaves behind in RSS, in-process, without a cluster.

A watch of our own (kube/watching.py: nodes, operand pods, DaemonSets) lists its kind page by
page: each page is decoded whole (`watching.decode`: managedFields cut, then `json.loads`), then
turned into the records the Runtime keeps (here `kube.reading.node_facts`). The records live
for the process's life and are allocated among the page's decoded objects; CPython returns a
pymalloc arena (1 MiB) only once it is empty, so every arena a page touched stays resident
for the records in it (issue 13: idle RSS). The larger the page, the more arenas it spreads over.

For each page size, a fresh process lists N kwok-like GPU Nodes (the harness's `gpu_node`
plus the status and managedFields kwok and the apiserver add, about 4.6 KB of compact JSON each) from
files written beforehand (so that the raw pages are not the measured process's), keeps their
NodeFacts, then collects garbage and trims as the operator does after a burst
(`ocp_gpu.memory.release_free_memory`), and reports how much RSS grew: the records themselves
(about 0.8 KB a node) plus what the pages left pinned. Seconds to run.

Run: ``.venv/bin/python bench/list_pages.py [--nodes 5000] [--pages 50 100 500 1000]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ocp_gpu_harness import nodes as fake_nodes

RHCOS = "416.94.202407030122-0"
CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
STAMP = "2026-11-24T11:00:00Z"


def kwok_node(index: int) -> dict[str, Any]:
    """A GPU Node as a LIST returns it once kwok made it Ready (status, managedFields)."""
    node = fake_nodes.gpu_node(f"gpu-{index:05d}", rhcos=RHCOS)
    metadata = node["metadata"]
    metadata.update(uid=str(uuid.uuid4()), resourceVersion=str(1000 + index), creationTimestamp=STAMP)
    condition_fields = {".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}}
    metadata["managedFields"] = [
        {
            "manager": "python",
            "operation": "Update",
            "apiVersion": "v1",
            "time": STAMP,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:labels": {f"f:{key}": {} for key in metadata["labels"]},
                    "f:annotations": {f"f:{key}": {} for key in metadata["annotations"]},
                },
            },
        },
        {
            "manager": "kwok",
            "operation": "Update",
            "apiVersion": "v1",
            "time": STAMP,
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {f'k:{{"type":"{kind}"}}': condition_fields for kind in CONDITIONS},
                    "f:nodeInfo": {"f:kernelVersion": {}, "f:osImage": {}, "f:kubeletVersion": {}},
                }
            },
        },
    ]
    status = node["status"]
    status["conditions"] = [
        {
            "type": kind,
            "status": "True" if kind == "Ready" else "False",
            "lastHeartbeatTime": STAMP,
            "lastTransitionTime": STAMP,
            "reason": "KubeletReady" if kind == "Ready" else f"KubeletHasNo{kind}",
            "message": "kubelet is posting ready status" if kind == "Ready" else f"kubelet has no {kind}",
        }
        for kind in CONDITIONS
    ]
    status["addresses"] = [
        {"type": "InternalIP", "address": f"10.0.{index // 250}.{index % 250}"},
        {"type": "Hostname", "address": metadata["name"]},
    ]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
    return node


# The measured process: list the pages, keep the records, trim, print the RSS growth in KiB.
LISTING = """
import sys
from pathlib import Path
from ocp_gpu import memory
from ocp_gpu.kube import reading, watching

def rss_kib():
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0])

memory.release_free_memory()
before = rss_kib()
facts = {}
for path in sorted(Path(sys.argv[1]).iterdir()):
    raw = path.read_bytes()
    page = watching.decode(raw)
    del raw
    for item in page["items"]:
        record = reading.node_facts(item)
        facts[record.name] = record
    del page, item, record
memory.release_free_memory()
print(rss_kib() - before, len(facts))
"""


def residual_mib(pages_dir: Path) -> float:
    """RSS growth of a fresh process that lists the pages in `pages_dir` and keeps their records."""
    out = subprocess.run(
        [sys.executable, "-c", LISTING, str(pages_dir)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout.split()
    return int(out[0]) / 1024


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pages", type=int, nargs="+", default=[50, 100, 500, 1000])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    # NB: compact, as the apiserver writes it (watching.decode looks for its exact bytes).
    nodes = [json.dumps(kwok_node(index), separators=(",", ":")) for index in range(args.nodes)]
    print(f"{args.nodes} nodes, {sum(map(len, nodes)) // args.nodes} bytes of JSON each")
    with tempfile.TemporaryDirectory() as scratch:
        for size in args.pages:
            pages = Path(scratch, str(size))
            pages.mkdir()
            for number, start in enumerate(range(0, args.nodes, size)):
                items = ",".join(nodes[start : start + size])
                (pages / f"{number:05d}").write_text(f'{{"kind":"NodeList","items":[{items}]}}')
            grown = [residual_mib(pages) for _ in range(args.repeat)]
            print(f"pages of {size:5d}: RSS +{' / '.join(f'{mib:.1f}' for mib in grown)} MiB, records kept")
    return 0


if __name__ == "__main__":
    sys.exit(main())
