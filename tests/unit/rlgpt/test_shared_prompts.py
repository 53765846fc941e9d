"""rlgpt.prompts: what planner and critic share (templates, condition texts, the LLM client they need).

(Named test_shared_prompts.py: tests/unit/planner/test_prompts.py holds the basename test_prompts.)
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from rlgpt import prompts
from rlgpt.llm import LLMClient, ReplayClient
from rlgpt.v1 import common_pb2
from services.critic import judge
from services.critic import prompt as critic_prompt
from services.planner import prompts as planner_prompts
from services.planner.agents import fast as fast_agent

ROOT = Path(__file__).resolve().parents[3]


def test_render_fills_fields_by_name_and_drops_header_lines(tmp_path) -> None:
    (tmp_path / "greet.txt").write_text('# covers: nothing\nHello {name}, answer {"ok": true}.\n{name}!\n')
    assert prompts.render(tmp_path, "greet", name="Ada") == 'Hello Ada, answer {"ok": true}.\nAda!\n'
    with pytest.raises(KeyError, match=r"prompt 'greet' needs fields \['name'\]"):
        prompts.render(tmp_path, "greet")


def test_conditions_text() -> None:
    both = [common_pb2.Condition(achievement="collect_wood"),
            common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=2))]
    assert prompts.conditions_text(both) == "achievement collect_wood and at least 2 wood"
    assert prompts.conditions_text([]) == "none"
    assert prompts.conditions_text([], "(none given)") == "(none given)"
    assert prompts.conditions_text([common_pb2.Condition(), *both[:1]]) == "achievement collect_wood"


def test_llm_clients_have_the_method_the_services_need() -> None:
    wanted = list(inspect.signature(prompts.CompletesJSON.complete).parameters)
    for client in (LLMClient, ReplayClient):
        assert list(inspect.signature(client.complete).parameters) == wanted


def test_planner_and_critic_use_the_one_copy() -> None:
    assert planner_prompts.render.func is prompts.render
    assert planner_prompts.render.args == (planner_prompts.PROMPT_DIR,)
    assert fast_agent.conditions_text is prompts.conditions_text is critic_prompt.conditions_text
    assert fast_agent.CompletesJSON is prompts.CompletesJSON and judge.CompletesJSON is prompts.CompletesJSON


@pytest.mark.parametrize(("service", "other"), [("critic", "planner"), ("planner", "critic")])
def test_services_never_import_each_other(service, other) -> None:
    for path in (ROOT / "services" / service).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.startswith(f"services.{other}")], path


def test_an_answer_copies_its_prompt_when_a_long_text_of_it_is_in_the_template(tmp_path) -> None:
    template = tmp_path / "t.txt"
    template.write_text('# comment: never seen\n{"rationale": "<why this chain and these decisions>", "code": '
                        '"def skill(agent):\\n    yield \\"do\\""}\n')
    assert prompts.copies_template({"rationale": "<why this chain and these decisions>"}, template)
    assert prompts.copies_template({"code": 'def skill(agent):\n    yield "do"'}, template)  # as the model reads it
    assert not prompts.copies_template({"rationale": "wood first, then the table", "n": 3}, template)
    assert not prompts.copies_template({"rationale": "comment: never seen"}, template)  # headers: not prompt
    assert not prompts.copies_template(None, template)
