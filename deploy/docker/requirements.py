"""Writes the requirements of one image from pyproject.toml, so the images install exactly what the extras say.

    python requirements.py pyproject.toml --base --extra env          # base dependencies + the env extra
    python requirements.py pyproject.toml --pick openai --pick grpcio  # single requirements, as pinned there

Used in the Dockerfile's ``reqs`` stage (it sees only pyproject.toml and constraints.txt, so the dependency
layers of every image stay cached until one of those two files changes). Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"cannot read a project name from {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def requirements(project: dict, base: bool, extras: list[str], picks: list[str]) -> list[str]:
    """The selected requirement strings, in pyproject order, without duplicates."""
    deps: list[str] = list(project.get("dependencies", []))
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    selected: list[str] = list(deps) if base else []
    for extra in extras:
        if extra not in optional:
            raise KeyError(f"no extra {extra!r} in pyproject.toml (extras: {', '.join(sorted(optional))})")
        selected.extend(optional[extra])
    if picks:
        everything = deps + [r for group in optional.values() for r in group]
        by_name: dict[str, str] = {}
        for requirement in everything:
            by_name.setdefault(_name(requirement), requirement)
        for pick in picks:
            if _name(pick) not in by_name:
                raise KeyError(f"no requirement named {pick!r} in pyproject.toml")
            selected.append(by_name[_name(pick)])
    seen: set[str] = set()
    out: list[str] = []
    for requirement in selected:
        if requirement not in seen:
            seen.add(requirement)
            out.append(requirement)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pyproject")
    parser.add_argument("--base", action="store_true", help="include [project].dependencies")
    parser.add_argument("--extra", action="append", default=[], help="include this optional-dependencies group")
    parser.add_argument("--pick", action="append", default=[], help="include this one requirement")
    args = parser.parse_args(argv)
    with open(args.pyproject, "rb") as f:
        project = tomllib.load(f)["project"]
    try:
        lines = requirements(project, args.base, args.extra, args.pick)
    except (KeyError, ValueError) as exc:
        print(f"requirements.py: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
