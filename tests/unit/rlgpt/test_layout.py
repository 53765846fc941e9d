"""The layout's rules, read from the code with ``ast`` (imports inside functions and TYPE_CHECKING blocks count):
rlgpt/'s library imports no service and not the composition root (rlgpt/app/), a service imports no other
service, and the env server's sessions have no import circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVICES = sorted(p.name for p in (ROOT / "services").iterdir() if (p / "__init__.py").is_file())


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import statement is (relative imports resolved)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, up level - 1 packages
                package = _module(path).split(".")[:None if path.name == "__init__.py" else -1]
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _sources(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def _library_modules() -> list[Path]:
    rlgpt = ROOT / "rlgpt"
    return [p for p in _sources(rlgpt) if p.relative_to(rlgpt).parts[0] not in ("app", "v1")]


def test_the_library_imports_no_service_and_not_the_composition_root() -> None:
    wrong = {f"{p.relative_to(ROOT)} imports {name}" for p in _library_modules() for name in imported(p)
             if _within(name, "services") or _within(name, "rlgpt.app")}
    assert not wrong, "rlgpt/'s library is shared by every service; wiring services belongs in rlgpt/app/:\n" + \
        "\n".join(sorted(wrong))


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_imports_no_other_service(service: str) -> None:
    others = [f"services.{other}" for other in SERVICES if other != service]
    wrong = {f"{p.relative_to(ROOT)} imports {name}" for p in _sources(ROOT / "services" / service)
             for name in imported(p) if any(_within(name, other) for other in others)}
    assert not wrong, "services talk through their gRPC contracts, not each other's code:\n" + "\n".join(sorted(wrong))


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (module -> modules it imports), or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for after in sorted(graph[node]):
            if state.get(after) == 1:
                return [*path[path.index(after):], after]
            if after not in state and (found := visit(after)):
                return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_the_sessions_have_no_import_circle() -> None:
    folder = ROOT / "services" / "env_server" / "sessions"
    modules = {_module(p): p for p in _sources(folder) if p.name != "__init__.py"}
    graph = {name: {m for m in imported(path) if m in modules} for name, path in modules.items()}
    assert "services.env_server.sessions.session" not in graph["services.env_server.sessions.macro_actions"]
    assert not (circle := _cycle(graph)), "import circle: " + " -> ".join(circle)


def test_the_checks_see_imports_in_functions_and_type_checking_blocks(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from services.planner import x\n"
                      "def f():\n    import services.critic.judge\n")
    assert {"services.planner", "services.critic.judge"} <= imported(source)
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"] and _cycle({"a": {"b"}, "b": set()}) == []
