"""YAML for untrusted files: PyYAML's safe loader with anchors/aliases bounded, nesting bounded, one document."""

from __future__ import annotations

from typing import Any

import yaml

# An alias is a pointer, so a few kilobytes of nested aliases (the "billion laughs") describe billions of
# nodes; anything that walks the result (validation, copying) then explodes. Counting the nodes the
# document stands for, with every alias expanded, refuses that in microseconds. 100,000 is far above any
# config or node spec (the largest realistic ones have a few thousand) and far below a bomb.
MAX_EXPANDED_NODES = 100_000
# PyYAML's composer recurses once per level; the interpreter's stack gives out near 1,000.
MAX_DEPTH = 100


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
    _check_depth(text, max_depth)
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        if _expanded_size(root, {}, max_nodes) > max_nodes:
            raise UnsafeYaml(f"YAML expands to more than {max_nodes} nodes (aliases counted in full)")
        try:
            return loader.construct_document(root), root
        except ValueError as exc:  # int() refusing a 5,000-digit number, say: still a bad document
            raise UnsafeYaml(str(exc)) from exc
    finally:
        loader.dispose()  # type: ignore[no-untyped-call]


def _check_depth(text: str, max_depth: int) -> None:
    """Walk the event stream (flat, no recursion) so nesting is refused before the recursive composer runs."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > max_depth:
                line = event.start_mark.line + 1 if event.start_mark is not None else 0
                raise UnsafeYaml(f"line {line}: YAML nested deeper than {max_depth} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _expanded_size(node: yaml.Node, sizes: dict[int, int], limit: int) -> int:
    """Nodes `node` stands for with aliases expanded; memoised per node, so shared subtrees cost once to count."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = limit + 1  # a node reached again while being counted is a cycle: count it as too big
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, sizes, limit)
            if total > limit:
                break
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            total += _expanded_size(key, sizes, limit) + _expanded_size(value, sizes, limit)
            if total > limit:
                break
    sizes[id(node)] = total
    return total
