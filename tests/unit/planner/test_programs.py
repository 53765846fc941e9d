"""Skill programs: the schema built from a real env server's Describe, the checks that name a step, the compiled
code run by real Crafter through RunSkill, and the fast agent writing programs through the LLM client."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from fakes.fake_openai import FakeOpenAIServer, Reply
from pydantic import ValidationError

from rlgpt.config import LLMSettings
from rlgpt.llm.client import LLMClient
from rlgpt.llm.local_server import MODEL_ALIAS
from rlgpt.v1 import common_pb2, env_pb2, planner_pb2
from services.planner.agents.fast import FastAgent
from services.planner.agents.slow import SlowAgent
from services.planner.program_code import PROGRAM_HEADER, compile_program, program_of
from services.planner.program_writer import resolve_skill_format
from services.planner.programs import (
    MAX_PROGRAM_STEPS,
    ProgramError,
    Vocabulary,
    check_program,
    program_schema,
    program_steps,
    programs_supported,
)
from services.planner.skill_library import SkillLibrary

SETTINGS = LLMSettings(max_retries=1, backoff_seconds=0.01, timeout_seconds=5, model="scripted")
PICKAXE = [{"op": "collect", "item": "wood", "count": 3}, {"op": "place", "item": "table"},
           {"op": "make", "item": "wood_pickaxe"}]
ACHIEVED = [common_pb2.Condition(achievement="make_wood_pickaxe")]


def parse(describe: env_pb2.DescribeResponse, steps: list[dict]) -> list[dict]:
    schema = program_schema(Vocabulary.of(describe))
    return program_steps(schema.model_validate({"steps": steps}))


def run(env_server, code: str, success: list[common_pb2.Condition], start: tuple = (), episodes: int = 4):
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="program_test", code=code, replace=True))
    return env_server.stub.RunSkill(env_pb2.RunSkillRequest(
        skill="program_test", episodes=episodes, max_steps=300, seed=5,
        task=common_pb2.TaskSpec(name="t", success=success,
                                 start_inventory=[common_pb2.ItemCount(item=i, count=n) for i, n in start])))


def test_every_name_is_an_enum_of_the_served_rules(describe) -> None:
    vocabulary = Vocabulary.of(describe)
    rules = describe.rules
    assert set(vocabulary.collect) == {c.item for r in rules.collect for c in r.receives} & set(describe.items)
    assert set(vocabulary.make) == {r.item for r in rules.make}
    assert set(vocabulary.place) == {r.item for r in rules.place}
    text = json.dumps(program_schema(vocabulary).model_json_schema())
    for name in (*vocabulary.collect, *vocabulary.materials, *describe.actions, *describe.achievements):
        assert f'"{name}"' in text
    # A make step can only name what a make rule makes (the schema, so constrained decoding, knows it).
    with pytest.raises(ValidationError, match="wood_pickaxe"):
        parse(describe, [{"op": "make", "item": "wood"}])


@pytest.mark.parametrize(("steps", "says"), [
    ([{"op": "fly", "to": "moon"}], "does not match any of the expected tags"),  # unknown op
    ([{"op": "collect", "item": "gold", "count": 1}], "collect.item"),  # unknown argument value
    ([{"op": "go_to", "target": "tree", "speed": 3}], "go_to.speed"),  # unknown argument
    ([], "at least 1 item"),  # empty program
    ([{"op": "act", "action": "noop", "times": 1}] * 1000, f"at most {MAX_PROGRAM_STEPS} items"),
])
def test_bad_programs_are_refused_by_the_schema_with_what_is_wrong(describe, steps, says) -> None:
    schema = program_schema(Vocabulary.of(describe))
    with pytest.raises(ValidationError, match=says):
        schema.model_validate({"steps": steps})


def test_a_repeat_of_more_steps_than_there_are_is_corrected_or_refused(describe) -> None:
    steps = parse(describe, [{"op": "repeat", "last": 2, "times": 2}, {"op": "collect", "item": "wood", "count": 1},
                             {"op": "repeat", "last": 3, "times": 2}])
    assert steps == [{"op": "collect", "item": "wood", "count": 1}, {"op": "repeat", "last": 1, "times": 2}]
    raw = [{"op": "collect", "item": "wood", "count": 1}, {"op": "repeat", "last": 3, "times": 2}]
    with pytest.raises(ProgramError, match=r"step 2 .*only 1 steps come before it"):
        check_program(raw, describe.rules, list(describe.actions))  # what reaches the check unparsed


def test_out_of_range_numbers_are_corrected_not_fatal(describe) -> None:
    steps = parse(describe, [{"op": "collect", "item": "wood", "count": 0},
                             {"op": "act", "action": "do", "times": 5000, "until": {"item": "wood", "count": 99}},
                             {"op": "repeat", "last": 0, "times": -3}])
    assert [steps[0]["count"], steps[1]["times"], steps[1]["until"]["count"], steps[2]["last"], steps[2]["times"]] \
        == [1, 200, 9, 1, 1]
    # Two conditions at once: the item count is kept; none at all: the action runs `times` times.
    both, neither = parse(describe, [
        {"op": "act", "action": "do", "times": 5, "until": {"achievement": "collect_wood", "item": "wood"}},
        {"op": "act", "action": "do", "times": 5, "until": {}}])
    assert both["until"] == {"item": "wood", "count": 1} and "until" not in neither


@pytest.mark.parametrize(("steps", "says"), [
    ([{"op": "act", "action": "noop", "times": 50, "until": {"achievement": "collect_wood"}}],
     r"step 1 \(act noop until collect_wood\): doing noop never gets collect_wood; by the rules it comes from do"),
])
def test_programs_that_cannot_work_name_the_step_and_what_to_change(describe, steps, says) -> None:
    with pytest.raises(ProgramError, match=says):
        check_program(parse(describe, steps), describe.rules, list(describe.actions))


def test_repeats_past_the_step_limit_are_cut_to_what_fits_and_the_check_still_refuses_raw_ones(describe) -> None:
    raw = [{"op": "act", "action": "noop", "times": 1}, {"op": "repeat", "last": 1, "times": 9},
           {"op": "repeat", "last": 2, "times": 9}, {"op": "repeat", "last": 3, "times": 9}]
    steps = parse(describe, raw)  # sizes 1, 9, 90 (10 x 9); then 100 x 9 is cut to 100 x 1: 200 in all
    assert [s.get("times") for s in steps] == [1, 9, 9, 1]
    check_program(steps, describe.rules, list(describe.actions))
    assert len(parse(describe, [*raw[:3], {"op": "repeat", "last": 3, "times": 9},
                                {"op": "repeat", "last": 1, "times": 2}])) == 4  # nothing fits: dropped
    with pytest.raises(ProgramError, match=r"step 4 .*more than 200 steps; repeat fewer steps or fewer times"):
        check_program(raw, describe.rules, list(describe.actions))  # what reaches the check unparsed


def test_a_compiled_program_is_ordinary_skill_code_that_real_crafter_runs(env_server, describe) -> None:
    steps = parse(describe, PICKAXE)
    check_program(steps, describe.rules, list(describe.actions))
    code = compile_program(steps, describe)
    assert code.startswith(PROGRAM_HEADER) and program_of(code) == steps and "def skill(agent):" in code
    assert program_of("def skill(agent):\n    yield 'noop'\n") is None
    result = run(env_server, code, ACHIEVED)
    assert result.success_rate == 1.0, [e.error.message for e in result.episodes]


def test_a_step_that_cannot_go_on_names_the_step_and_passes_registration(env_server, describe) -> None:
    # Stone needs a pickaxe held: the program gives up at step 1 on purpose; RegisterSkill accepts that (it is
    # a game outcome, like dying) and RunSkill reports the message with what to change.
    code = compile_program(parse(describe, [{"op": "collect", "item": "stone", "count": 1}]), describe)
    result = run(env_server, code, [common_pb2.Condition(achievement="collect_stone")], episodes=2)
    assert result.success_rate == 0.0
    for episode in result.episodes:
        assert "step 1 (collect stone 1): collecting stone needs 1 wood_pickaxe held" in episode.error.message
        assert "add a step that makes or collects it before step 1" in episode.error.message
    # With the pickaxe at the start the same program succeeds.
    assert run(env_server, code, [common_pb2.Condition(achievement="collect_stone")], start=(("wood_pickaxe", 1),),
               episodes=2).success_rate == 1.0
    # Making with no table ever placed: the step says to place one first.
    code = compile_program(parse(describe, [{"op": "make", "item": "wood_pickaxe"}]), describe)
    result = run(env_server, code, ACHIEVED, start=(("wood", 3),), episodes=1)
    assert "add a place table step before step 1" in result.episodes[0].error.message


def test_drinking_and_repeats_run(env_server, describe) -> None:
    drink = parse(describe, [{"op": "go_to", "target": "water"},
                             {"op": "act", "action": "do", "times": 5, "until": {"achievement": "collect_drink"}}])
    check_program(drink, describe.rules, list(describe.actions))
    assert run(env_server, compile_program(drink, describe),
               [common_pb2.Condition(achievement="collect_drink")]).success_rate >= 0.75
    repeated = parse(describe, [{"op": "collect", "item": "wood", "count": 1}, {"op": "act", "action": "noop",
                                                                                 "times": 1},
                                {"op": "repeat", "last": 2, "times": 2}])
    code = compile_program(repeated, describe)
    assert code.count("for again in range(2):") == 1 and code.count("yield from collect(") == 1
    result = run(env_server, code, [common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=1))])
    assert result.success_rate == 1.0


def test_registration_still_refuses_a_real_code_error(env_server) -> None:
    broken = "def skill(agent):\n    yield 'noop'\n    x = undefined_name + 1\n    yield 'noop'\n"
    with pytest.raises(grpc.RpcError) as err:
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="program_broken", code=broken, replace=True))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "NameError" in err.value.details()


def test_auto_writes_programs_for_the_embedded_models_only(describe) -> None:
    assert resolve_skill_format("auto", MODEL_ALIAS, describe) == "program"
    assert resolve_skill_format("auto", "gemma3-270m", describe) == "program"
    assert resolve_skill_format("auto", "gpt-4o-mini", describe) == "python"
    assert resolve_skill_format("program", "gpt-4o-mini", describe) == "program"
    assert resolve_skill_format("python", MODEL_ALIAS, describe) == "python"
    # A backend whose skill API has no map memory or routes (MineDojo's) cannot run programs: Python.
    no_map = env_pb2.DescribeResponse()
    no_map.CopyFrom(describe)
    no_map.skill_api = "agent.actions -> tuple\nagent.steps -> int"
    assert not programs_supported(no_map) and programs_supported(describe)
    assert resolve_skill_format("program", MODEL_ALIAS, no_map) == "python"


def test_the_fast_agent_writes_verified_program_candidates(env_server, describe, tmp_path) -> None:
    """Two candidates with distinct seeds. The first names an action outside its sub-task's prerequisites (the
    narrowed schema refuses it, naming the allowed ones), then writes a step that can never work (refused naming
    the step): a failed candidate whose error feeds the revision. The second is good: kept, registered, stored."""
    library = SkillLibrary(tmp_path / "lib.json")
    unrelated = {"steps": [
        {"op": "act", "action": "noop", "times": 9, "until": {"achievement": "make_wood_pickaxe"}}]}
    never = {"steps": [
        {"op": "act", "action": "do", "times": 9, "until": {"achievement": "make_wood_pickaxe"}}]}
    good = {"steps": PICKAXE}
    script = [Reply.json(unrelated), Reply.json(never), Reply.json(good)]
    subtask = planner_pb2.SubTask(name="make_wood_pickaxe", description="make a wood pickaxe", success=ACHIEVED)
    with FakeOpenAIServer(script) as server:
        llm = LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm")
        fast = FastAgent(llm, env_server.stub, describe, library, test_episodes=2, test_steps=300, seed=4,
                         skill_format="program")
        candidates = fast.write_skill(subtask, candidates=2)
        requests = server.requests
    assert [r.get("seed") for r in requests] == [4000, 4000, 4001]  # the repair turn keeps its candidate's seed
    assert "Input should be 'do', 'place_table' or 'make_wood_pickaxe'" in requests[1]["messages"][-1]["content"]
    prompt = requests[0]["messages"][0]["content"]
    assert '"op": "collect"' in prompt and describe.rules.text.strip()[:200] in prompt
    best, failed = candidates
    assert best.success_rate == 1.0 and program_of(best.answer.code) == PICKAXE
    assert best.answer.name == "make_wood_pickaxe" and best.answer.description == \
        "make a wood pickaxe: collect wood 3, then place table, then make wood_pickaxe"
    assert failed.answer is None and "step 1 (act do until make_wood_pickaxe): doing do never gets " \
        "make_wood_pickaxe; by the rules it comes from make_wood_pickaxe" in failed.error.message
    assert {s.name: s.code for s in library.all()}["make_wood_pickaxe"] == best.answer.code
    assert "make_wood_pickaxe" in {s.name for s in env_server.stub.ListSkills(env_pb2.ListSkillsRequest()).skills}


def test_a_programs_names_are_its_subtasks_prerequisites(describe) -> None:
    vocabulary = Vocabulary.of(describe)
    wood = vocabulary.narrowed(describe.rules, [common_pb2.Condition(achievement="collect_wood")],
                               list(describe.actions))
    assert (wood.collect, wood.place, wood.make, wood.materials, wood.actions) == \
        (("wood",), (), (), ("tree",), ("do",))
    stone = vocabulary.narrowed(describe.rules, [common_pb2.Condition(achievement="collect_stone")],
                                list(describe.actions))
    assert set(stone.collect) == {"stone", "wood"} and stone.make == ("wood_pickaxe",) and stone.place == ("table",)
    # No rule covers eating a cow: every name stays.
    assert vocabulary.narrowed(describe.rules, [common_pb2.Condition(achievement="eat_cow")],
                               list(describe.actions)) == vocabulary


def test_the_steps_run_again_until_the_subtasks_success_holds(env_server, describe) -> None:
    three = [common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))]
    once = parse(describe, [{"op": "collect", "item": "wood", "count": 1}])  # "1 more wood", a small model's answer
    code = compile_program(once, describe, success=three)
    assert "for rerun in range(20):" in code
    result = run(env_server, code, three)
    assert result.success_rate == 1.0 and all(e.final_inventory[0].count == 3 for e in result.episodes)
    # Without the sub-task's conditions the steps run once: 1 wood, not 3.
    assert run(env_server, compile_program(once, describe), three).success_rate == 0.0
    # Collect counts more: with 2 wood at the start, "collect 1" ends with 3.
    assert run(env_server, compile_program(once, describe), three, start=(("wood", 2),)).success_rate == 1.0


def test_an_act_step_that_changes_nothing_ends_early_and_success_ends_the_skill_mid_pass(env_server, describe) -> None:
    # A small model's answer: collect, then "do" 200 times on the grass the tree left, repeated. The idle act
    # steps end after 4 frames without progress; the next pass collects again; 3 wood within the test's frames.
    three = [common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))]
    wasteful = parse(describe, [{"op": "collect", "item": "wood", "count": 1},
                                {"op": "act", "action": "do", "times": 200}, {"op": "repeat", "last": 1, "times": 9}])
    code = compile_program(wasteful, describe, success=three)
    result = run(env_server, code, three)
    assert result.success_rate == 1.0, [e.text[-300:] for e in result.episodes]
    assert max(e.steps for e in result.episodes) < 300


def test_collecting_more_than_the_inventory_holds_stops_at_its_limit(env_server, describe) -> None:
    nine = [common_pb2.Condition(achievement="place_table")]
    greedy = parse(describe, [{"op": "collect", "item": "wood", "count": 9}, {"op": "place", "item": "table"}])
    result = run(env_server, compile_program(greedy, describe, success=nine), nine, start=(("wood", 3),))
    assert result.success_rate >= 0.75, [e.error.message for e in result.episodes]  # 3 + 9 > 9: it stops at 9


def test_a_program_of_the_most_steps_and_nested_repeats_compiles_small_and_is_written(env_server, describe,
                                                                                      tmp_path) -> None:
    """Gemma 3 270M's answer in bench-llm (8 steps) once compiled past the 8,000 characters a model's own code may
    have, and the fast agent crashed on it; and repeats of repeats used to copy their bodies."""
    gemma = {"steps": [{"op": "collect", "item": "wood", "count": 100}] + [{"op": "place", "item": "table"}] * 7}
    nested = {"steps": [{"op": "collect", "item": "wood", "count": 1}, {"op": "act", "action": "noop", "times": 1},
                        {"op": "repeat", "last": 2, "times": 3}, {"op": "repeat", "last": 3, "times": 3},
                        {"op": "repeat", "last": 4, "times": 2}]}
    code = compile_program(parse(describe, nested["steps"]), describe)
    assert code.count("yield from collect(") == 1 and len(code) < 10_000
    subtask = planner_pb2.SubTask(name="place_table", description="place a table",
                                  success=[common_pb2.Condition(achievement="place_table")])
    with FakeOpenAIServer([Reply.json(gemma)]) as server:
        llm = LLMClient(SETTINGS, base_url=server.base_url, record_dir=tmp_path / "llm")
        fast = FastAgent(llm, env_server.stub, describe, SkillLibrary(tmp_path / "lib.json"), test_episodes=2,
                         test_steps=300, seed=4, skill_format="program")
        best, = fast.write_skill(subtask, candidates=1)
    assert len(best.answer.code) > 8000, "no longer tests the case: a program compiled past the model code limit"
    assert best.success_rate > 0, best.error


def test_plans_held_to_the_rules_name_only_the_goals_prerequisites(describe) -> None:
    """A base model copied the answer form's "<snake_case name>" as sub-task names; with closed names it cannot."""
    library = SkillLibrary(Path("/nonexistent/lib.json"))
    task = common_pb2.TaskSpec(name="make_wood_pickaxe", success=ACHIEVED)
    _, schema = SlowAgent(None, describe, library, closed_names=True).prompt(task)
    names = schema.model_json_schema()["$defs"]["SubTask"]["properties"]["name"]["enum"]
    assert set(names) == {"collect_wood", "place_table", "make_wood_pickaxe"}
    with pytest.raises(ValidationError, match=r"subtasks\.0\.name\n  Input should be .collect_wood."):
        schema.model_validate({"rationale": "", "subtasks": [
            {"name": "snake_case_name", "description": "", "success": [{"achievement": "collect_wood"}],
             "decision": "code"}]})
    _, told = SlowAgent(None, describe, library, closed_names=True).prompt(task, feedback="died of thirst: "
                                                                               "add collect_drink first")
    told_names = told.model_json_schema()["$defs"]["SubTask"]["properties"]["name"]["enum"]
    assert set(told_names) == {"collect_drink", "collect_wood", "place_table", "make_wood_pickaxe"}  # the critic's need
    _, free = SlowAgent(None, describe, library).prompt(task)
    assert "enum" not in free.model_json_schema()["$defs"]["SubTask"]["properties"]["name"]
