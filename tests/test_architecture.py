"""The package's dependency rules, checked on the import graph so they cannot quietly erode.

* no import cycle inside ``shapeshift`` (every import counts: module level, inside
  functions and under ``TYPE_CHECKING``, because each is a dependency a reader must follow);
* the engine defines the policy contract and never imports ``shapeshift.policies``;
* the policies never import what runs them (the simulator, the run path, the live
  runtime, the CLI, the experiments): a policy that plans by simulating is handed the
  simulation (``shapeshift.engine.replay``);
* the live runtime's HTTP layer and its controller do not import each other;
* nothing probes a policy, its parts, an executor or a throughput model with ``getattr``
  or ``hasattr``: what they may also do is declared in ``shapeshift.engine.contract``.

The graph is read with ``ast`` from the source files, nothing is imported.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "shapeshift").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str:
    """The module an import lands in (``a.b.C`` -> ``a.b`` when ``C`` is a name in it)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("shapeshift"):
                    target = _resolve(name, modules)
                    if target and target != module:
                        deps.add(target)
        graph[module] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_cycle_and_a_clean_graph():
    # a -> b -> c -> a is one cycle; d -> a is not part of it.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_inside_shapeshift():
    assert cycles(import_graph()) == []


def test_the_engine_never_imports_the_policies():
    graph = import_graph()
    offenders = {
        module: sorted(d for d in deps if d.startswith("shapeshift.policies"))
        for module, deps in graph.items()
        if module.startswith("shapeshift.engine")
    }
    assert {m: d for m, d in offenders.items() if d} == {}


#: What runs a policy; a policy importing any of it would run it from the inside.
RUNNERS = ("shapeshift.sim", "shapeshift.runs", "shapeshift.runtime", "shapeshift.cli", "shapeshift.experiments")


def _is_under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_policies_never_import_what_runs_them():
    graph = import_graph()
    offenders = {
        module: sorted(d for d in deps if any(_is_under(d, r) for r in RUNNERS))
        for module, deps in graph.items()
        if _is_under(module, "shapeshift.policies")
    }
    assert {m: d for m, d in offenders.items() if d} == {}


def test_the_policy_rule_sees_imports_inside_functions_and_type_checking(tmp_path, monkeypatch):
    # A function-level import and a TYPE_CHECKING import of the simulator are both edges.
    package = tmp_path / "shapeshift" / "policies"
    package.mkdir(parents=True)
    (tmp_path / "shapeshift" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "late.py").write_text("def f():\n    from shapeshift.sim import simulator\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shapeshift.runs.spec import RunSpec\n"
    )
    (tmp_path / "shapeshift" / "sim").mkdir()
    (tmp_path / "shapeshift" / "sim" / "__init__.py").write_text("")
    (tmp_path / "shapeshift" / "sim" / "simulator.py").write_text("")
    (tmp_path / "shapeshift" / "runs").mkdir()
    (tmp_path / "shapeshift" / "runs" / "__init__.py").write_text("")
    (tmp_path / "shapeshift" / "runs" / "spec.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    graph = import_graph()
    assert graph["shapeshift.policies.late"] == {"shapeshift.sim.simulator"}
    assert graph["shapeshift.policies.typed"] == {"shapeshift.runs.spec"}


def test_the_engine_owns_the_policy_contract():
    from shapeshift.engine import contract
    from shapeshift.policies.framework import base

    assert base.Policy is contract.Policy and base.PolicyError is contract.PolicyError


def test_every_builtin_policy_is_registered_by_its_module():
    """``BUILTIN_POLICIES`` names the module of each policy: building one imports only that."""
    from shapeshift.policies.framework.registry import BUILTIN_POLICIES, registry

    assert set(registry()) == set(BUILTIN_POLICIES)


def test_runtime_http_layer_and_controller_do_not_import_each_other():
    graph = import_graph()
    http = {m for m in graph if m.startswith("shapeshift.runtime.api")}
    controller = {m for m in graph if m.startswith("shapeshift.runtime.controller")}
    assert not any(graph[m] & controller for m in http)
    assert not any(graph[m] & http for m in controller)


def test_modules_stay_small():
    """About 400 lines at most per module: one job each (a little slack for docstrings)."""
    sizes = {str(p.relative_to(SRC)): len(p.read_text().splitlines()) for p in (SRC / "shapeshift").rglob("*.py")}
    assert {path: n for path, n in sizes.items() if n > 450} == {}


#: ``getattr``/``hasattr`` on a policy, its parts, an executor or a throughput model: an
#: undeclared contract. What these objects may also do is declared in
#: ``shapeshift.engine.contract`` (``PolicyTraits`` and the capability protocols).
_PROBE = re.compile(
    r"\b(?:getattr|hasattr)\(\s*(?:\w+\.)*(?:inner|policy|executor|throughput|ordering|admission|placement)\s*,"
)
#: Modules allowed to probe such objects (none: the contract says everything).
PROBE_ALLOWED: frozenset[str] = frozenset()


def probes(text: str) -> list[str]:
    """The lines of ``text`` that probe a policy, part, executor or model for an attribute."""
    return [line.strip() for line in text.splitlines() if _PROBE.search(line)]


def test_no_module_probes_policies_executors_or_models_for_attributes():
    found = {
        str(p.relative_to(SRC)): probes(p.read_text())
        for p in (SRC / "shapeshift").rglob("*.py")
        if str(p.relative_to(SRC)) not in PROBE_ALLOWED
    }
    assert {path: lines for path, lines in found.items() if lines} == {}


def test_the_probe_rule_sees_the_usual_spellings():
    # Each of these reads an undeclared attribute of a policy-side object.
    for line in (
        'x = getattr(policy, "partition_local", False)',
        'x = getattr(self.policy, "lease", 0.0)',
        'x = hasattr(policy, "prepare")',
        'x = getattr(self.inner.admission, "adopt", None)',
        'x = getattr(executor, "use_sharing", None)',
        'x = getattr(throughput, "rate_at", None)',
        'x = getattr(self.ordering, "static_keys", False)',
        'x = getattr(result.policy, "knowledge", None)',
    ):
        assert probes(line), line
    # An argparse namespace or a module is not a policy.
    assert not probes('x = getattr(args, "policy", None)')
    assert not probes("x = getattr(importlib.import_module(home), name)")
