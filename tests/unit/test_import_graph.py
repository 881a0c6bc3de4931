"""magw's modules import each other without a cycle: each sits below its users (docs/architecture.md, "Layers").

The graph is grimp's (the library under import-linter): it counts every import, those inside functions and
those under ``TYPE_CHECKING`` too, so a cycle hidden in a function-level import or a type hint still fails here.
A failure names each cycle as ``module -> module -> ... -> first module``, with the import lines that close it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from itertools import pairwise

import grimp


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` (node -> the nodes it points to), iteratively.

    Edges to nodes that are not keys of ``graph`` are ignored. Each component is sorted; the list is sorted too.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(n for n in graph[root] if n in graph)))]
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(n for n in graph[child] if n in graph))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return sorted(out)


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle per strongly connected component that has one, as a path that ends where it starts.

    The path starts at the component's first node (sorted) and is a shortest way back to it, so the
    names are stable from run to run. A node that points to itself is a cycle of one edge.
    """
    found: list[list[str]] = []
    for component in strongly_connected(graph):
        members = set(component)
        start = component[0]
        if len(component) == 1 and start not in set(graph[start]):
            continue
        previous: dict[str, str] = {}
        queue = deque([start])
        end = None
        while queue and end is None:
            node = queue.popleft()
            for nxt in sorted(set(graph[node]) & members):
                if nxt == start:
                    end = node
                    break
                if nxt not in previous:
                    previous[nxt] = node
                    queue.append(nxt)
        assert end is not None, f"component {component} has no way back to {start}"
        path = [end]
        while path[-1] != start:
            path.append(previous[path[-1]])
        found.append([*reversed(path), start])
    return found


def test_cycle_finder_names_each_cycle_of_a_hand_made_graph() -> None:
    """Two cycles (a three-module loop reached from outside, and a module importing itself) are found and named
    from their first module; the acyclic parts (d, f) are not reported."""
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "f"], "d": ["a"], "e": ["e"], "f": []}
    assert cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]


def test_cycle_finder_takes_a_shortest_way_back_and_finds_nothing_in_a_tree() -> None:
    """Inside one component with two loops through ``a``, the short one names it; a graph with shared
    dependencies but no loop (a diamond) has no cycle."""
    assert cycles({"a": ["b", "x"], "b": ["c"], "c": ["a"], "x": ["a"]}) == [["a", "x", "a"]]
    assert cycles({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": [], "z": ["q"]}) == []


def test_cycle_finder_handles_a_long_chain_without_recursion() -> None:
    """A chain longer than Python's recursion limit that closes on itself is one cycle of every node."""
    names = [f"m{i:05d}" for i in range(5000)]
    graph = {n: [names[(i + 1) % len(names)]] for i, n in enumerate(names)}
    assert cycles(graph) == [[*names, names[0]]]


def test_magw_import_graph_has_no_cycle() -> None:
    """No magw module imports (even inside a function or under TYPE_CHECKING) a module that imports it back."""
    graph = grimp.build_graph("magw", cache_dir=None)
    modules = graph.modules
    assert "magw.cli.main" in modules and "magw.desired.state" in modules  # the graph is magw's, not empty
    imports = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    found = cycles(imports)
    lines = []
    for cycle in found:
        lines.append(" -> ".join(cycle))
        for importer, imported in pairwise(cycle):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"    {importer}:{detail['line_number']}: {detail['line_contents']}")
    assert not found, "import cycles in magw:\n" + "\n".join(lines)
