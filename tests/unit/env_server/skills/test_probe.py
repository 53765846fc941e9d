"""RegisterSkill's test run tells a skill's own raise (it gave up on a world: a game outcome) from a code error."""

from __future__ import annotations

from services.env_server.skills.probe import gave_up

CODE = '''def skill(agent):
    if agent.inventory.get("iron_pickaxe", 0) < 1: raise ValueError("no iron_pickaxe: make one first")
    if agent.health < 2:
        raise RuntimeError(
            "too hurt to go on")
    yield agent.nonexistent()
'''


def error(line: int, kind: str = "ValueError") -> dict[str, object]:
    return {"type": kind, "message": "m", "line": line}


def test_a_raise_on_the_line_of_an_if_is_the_skills_own() -> None:
    assert gave_up(error(2), CODE)  # `if ...: raise ...` on one line, as a model writes it


def test_a_raise_statement_of_its_own_line_is_the_skills_own() -> None:
    assert gave_up(error(4, "RuntimeError"), CODE)


def test_an_error_the_interpreter_raises_elsewhere_is_a_code_error() -> None:
    assert not gave_up(error(6, "AttributeError"), CODE)
    assert not gave_up(error(5, "RuntimeError"), CODE)  # the raise's message line is not where it starts
    assert not gave_up(error(0), CODE)


def test_the_servers_own_errors_are_never_a_give_up() -> None:
    for kind in ("Timeout", "SandboxBusy", "NoYield"):
        assert not gave_up(error(2, kind), CODE)
