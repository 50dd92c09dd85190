"""Render one component's templates into manifest dicts, safely.

Every `{{ expression }}` goes through `yaml_value`: strings become double-quoted
JSON strings (with the few characters YAML would fold or reject escaped), numbers
and booleans stay scalars, mappings and lists become JSON flow collections.  A
value can therefore never open a new key, list item or document, whatever it
contains (newlines, `: `, `#`, `- `, quotes, `{{ }}`).  Undefined names fail loudly
(StrictUndefined); nothing is HTML-escaped.

NB: the rule for template authors is one value per `{{ }}`, standing alone as a YAML
value or key: `image: {{ image }}`, never `image: {{ repo }}/{{ name }}` (that would
render `"repo"/"name"`) and never inside a block scalar (`|`, `>`).  Compose strings
in Python.  The hostile-string tests in tests/unit/test_driver_rendering.py catch a
template that breaks the rule.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import yaml

# The templates live at the repository's top level (templates/); setup.py ships them in the
# wheel as ocp_gpu/templates.  So an installed package finds them inside itself and a checkout
# (editable install, tests) beside the package.  OCP_GPU_TEMPLATES overrides both (e.g. to try
# edits).  NB: the one place a template path is resolved: everything else calls templates_dir().
TEMPLATES_ENV = "OCP_GPU_TEMPLATES"
_PACKAGE = Path(__file__).resolve().parents[1]
_DEFAULT_TEMPLATES = (
    _PACKAGE / "templates" if (_PACKAGE / "templates").is_dir() else _PACKAGE.parent / "templates"
)
_SUFFIX = ".yaml.j2"

# What YAML accepts raw inside a double-quoted scalar: printable characters except the
# line breaks it would fold (NEL, LS, PS).  Everything else is written as a \u escape.
# libyaml's parser when PyYAML was built with it (the wheels are): the same safe constructor,
# about ten times faster than the pure-Python one, which was most of a pass's CPU.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NOT_RAW = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def templates_dir() -> Path:
    """Where the state-<component> template directories are."""
    return Path(os.environ.get(TEMPLATES_ENV) or _DEFAULT_TEMPLATES)


def yaml_string(text: str) -> str:
    """`text` as a double-quoted YAML scalar that loads back to exactly `text`."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _NOT_RAW.sub(
        lambda match: (
            f"\\u{ord(match.group()):04x}" if ord(match.group()) < 0x10000 else f"\\U{ord(match.group()):08x}"
        ),
        quoted,
    )


def yaml_value(value: Any) -> str:
    """One value as YAML text that cannot change the document's structure."""
    # an undefined name: StrictUndefined raises with the name when turned into text
    if isinstance(value, jinja2.Undefined):
        return str(value)
    # bool before int: True is an int in Python
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return yaml_string(value)
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"mapping keys must be strings, got {key!r}")
            items.append(f"{yaml_string(key)}: {yaml_value(item)}")
        return "{" + ", ".join(items) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(yaml_value(item) for item in value) + "]"
    # NB: floats are refused: YAML 1.1 reads JSON's 1e5 as a string.
    raise TypeError(f"cannot render {type(value).__name__} {value!r} into a manifest")


@functools.lru_cache(maxsize=8)
def _environment(directory: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        finalize=yaml_value,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def template_names(component: str, directory: Path | None = None) -> list[str]:
    """The component's template files, in apply (file name) order."""
    root = directory or templates_dir()
    folder = root / component
    if not folder.is_dir():
        raise FileNotFoundError(f"no templates for {component!r} in {root}")
    return sorted(f"{component}/{path.name}" for path in folder.iterdir() if path.name.endswith(_SUFFIX))


def render_state(
    component: str, context: Mapping[str, Any], *, directory: Path | None = None
) -> list[dict[str, Any]]:
    """Every manifest of `component` (e.g. "state-driver"), in file order.

    A template may render nothing (a conditional object) or several documents.
    """
    root = directory or templates_dir()
    manifests: list[dict[str, Any]] = []
    for name in template_names(component, root):
        manifests.extend(render_template(name, context, directory=root))
    return manifests


def render_template(
    name: str, context: Mapping[str, Any], *, directory: Path | None = None
) -> list[dict[str, Any]]:
    """The manifests of one template file (`<component>/<file>`), in document order."""
    text = _environment(directory or templates_dir()).get_template(name).render(**context)
    manifests: list[dict[str, Any]] = []
    for document in yaml.load_all(text, Loader=_LOADER):
        # empty documents: a conditional object that is off
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ValueError(f"{name} rendered a {type(document).__name__}, not an object")
        manifests.append(document)
    return manifests
