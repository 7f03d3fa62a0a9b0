"""YAML for untrusted files: PyYAML's safe loader with anchors/aliases bounded, nesting bounded, one document."""

from __future__ import annotations

from typing import Any

import yaml

from gpuslice.fsutil.plain_yaml import MAX_DEPTH  # one depth limit for both readers

# An alias is a pointer, so a few kilobytes of nested aliases (the "billion laughs") describe billions of
# nodes; anything that walks the result (validation, copying) then explodes. Counting the nodes the
# document stands for, aliases expanded, in one flat pass over the events refuses that at once.
# 100,000 is far above any config or node spec (the largest have a few thousand) and far below a bomb.
MAX_EXPANDED_NODES = 100_000

# libyaml's parser when PyYAML was built with it (the wheels are): ten times faster on a large hostile file.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class UnsafeYaml(yaml.YAMLError):
    """A YAML document refused for its shape (expansion, depth, several documents) rather than its syntax."""


def load_yaml(
    text: str, max_nodes: int = MAX_EXPANDED_NODES, max_depth: int = MAX_DEPTH
) -> tuple[Any, yaml.Node | None]:
    """(data, root node) of one YAML document; the node keeps line numbers for error messages.

    Raises yaml.YAMLError: syntax errors as PyYAML words them, UnsafeYaml for a bomb or a stack-breaker.
    An empty document gives (None, None).
    """
    _check_shape(text, max_nodes, max_depth)
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        try:
            return loader.construct_document(root), root
        except ValueError as exc:  # int() refusing a 5,000-digit number, say: still a bad document
            raise UnsafeYaml(str(exc)) from exc
    finally:
        loader.dispose()  # type: ignore[no-untyped-call]


def _check_shape(text: str, max_nodes: int, max_depth: int) -> None:
    """One flat pass over the event stream, before the recursive composer builds anything.

    Counts the nodes the document stands for with every alias expanded (an anchor's size is known when
    its node ends), so a bomb is refused after reading about `max_nodes` events, not after expanding.
    """
    nodes = 0
    open_collections: list[tuple[str | None, int]] = []  # (anchor, node count when it started)
    sizes: dict[str, int] = {}
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent):
            size = sizes.get(str(event.anchor))
            if size is None and any(anchor == event.anchor for anchor, _ in open_collections):
                raise UnsafeYaml(f"line {_line(event)}: alias *{event.anchor} is inside the node it names")
            nodes += size or 1  # an undefined alias: the composer reports it by name
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor is not None:
                sizes[str(event.anchor)] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            open_collections.append((event.anchor, nodes))
            nodes += 1
            if len(open_collections) > max_depth:
                raise UnsafeYaml(f"line {_line(event)}: YAML nested deeper than {max_depth} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, before = open_collections.pop()
            if anchor is not None:
                sizes[str(anchor)] = nodes - before
        if nodes > max_nodes:
            raise UnsafeYaml(
                f"line {_line(event)}: YAML expands to more than {max_nodes} nodes (aliases counted in full)"
            )


def _line(event: yaml.Event) -> int:
    return event.start_mark.line + 1 if event.start_mark is not None else 0
