"""Where in a YAML document a key path lives, so validation errors can cite a line.

pydantic reports *which* key is wrong (``nodes.0.inter_node_bandwidth``); users need to
know *where* in their file that is. We re-compose the document (nodes keep their source
marks) and walk the key path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml


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
