"""Reading user YAML: plain numbers only, and where a key path lives for error messages.

``safe_load`` is PyYAML's safe loader with YAML 1.1's surprising number forms turned
off: ``0x4``, ``0o17``, ``1_000`` and ``1:30`` stay text, so a cluster written ``0x4``
is not read as the number 4 (hexadecimal). Decimal integers and floats read as usual.

pydantic reports *which* key is wrong (``nodes.0.inter_node_bandwidth``); users need to
know *where* in their file that is. ``line_of`` re-composes the document (nodes keep
their source marks) and walks the key path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml


class _PlainNumbers(yaml.SafeLoader):
    """SafeLoader whose implicit int and float tags match decimal numbers only, and that
    refuses a key given twice in one mapping (PyYAML keeps the last silently, so a
    repeated ``gpus:`` would quietly overrule the first)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    repeated = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the base class names it
                    continue
                if repeated:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"found the key {key!r} twice",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_PlainNumbers.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _NUMBER_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_PlainNumbers.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(0|[1-9][0-9]*)$"), list("-+0123456789")
)
_PlainNumbers.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$|^[-+]?[0-9]+[eE][-+]?[0-9]+$"
        r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"
    ),
    list("-+0123456789."),
)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` with decimal numbers only (see the module docstring)."""
    return yaml.load(text, Loader=_PlainNumbers)


def safe_load_all(text: str) -> list[Any]:
    """Every document of a ``---``-separated stream, read as ``safe_load`` reads one."""
    return list(yaml.load_all(text, Loader=_PlainNumbers))


def line_of(text: str, loc: Sequence[Any]) -> int | None:
    """Best-effort 1-based line of the deepest part of ``loc`` found in ``text``."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if str(k.value) == str(key)), None)
            if match is None:
                break
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line
