"""Every prompt rendered from a real env server's Describe, read the way its reader reads it.

Renders the slow agent's, the fast agent's (code and RL) and the critic's prompts for the task make_wood_pickaxe
and checks what a model would trip over: unfilled fields, game facts that are not the served rules, proto enum
names, a skill list that differs from what the schema allows, and examples that solve a benchmark sub-task.
With RLGPT_PROMPTS_OUT set, the rendered prompts are written there (slow.txt, fast_code.txt, fast_rl.txt,
critic.txt) for people to read.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from pathlib import Path

import pytest

from benchmarks import bench_rlgpt
from benchmarks.bench_llm import SUBTASKS as BENCH_LLM_SUBTASKS
from benchmarks.bench_skills import SUBTASKS as BENCH_SKILLS_SUBTASKS
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, learner_pb2, planner_pb2
from rlgpt.world_rules import achievement_items, achievement_rule, ways_to_get
from services.critic.judge import CriticAnswer, Judge, deterministic_checks
from services.critic.prompt import PROMPT_DIR as CRITIC_PROMPT_DIR
from services.critic.settings import CriticSettings
from services.planner.agents.fast import FastAgent
from services.planner.agents.slow import SlowAgent
from services.planner.program_code import compile_program
from services.planner.program_writer import program_prompt
from services.planner.prompts import PROMPT_DIR, EvalProtocol, idle_and_moves
from services.planner.schemas import SKILL_CODE_LIMITS, SkillAnswer, rl_schema
from services.planner.skill_library import LibrarySkill, SkillLibrary

TASK = "make_wood_pickaxe"
PROTOCOL = EvalProtocol(test_episodes=4, test_steps=300, env_frames=20000, eval_episodes=8, final_frames=1000)
CHOP = ("def skill(agent):\n    while agent.inventory['wood'] < 3:\n        action = agent.step_to('tree')\n"
        "        yield action if action is not None else 'do'\n")
WANDER = "def skill(agent):\n    for i in range(60):\n        yield 'move_left'\n"
TURN = "def skill(agent):\n    for direction in ('left', 'up'):\n        yield agent.face(direction)\n"
CURVE = [{"env_frames": 1000.0 * i, "training_frames": 1000.0 * i, "success_rate": i / 40, "mean_return": i / 4,
          "job_id": "j1", "iteration": 0} for i in range(1, 21)]
CURVE[-1]["action_shares"] = {"do": 0.5, f"skill:{TASK}__turn": 0.3, "skill:get_wood": 0.2}  # as Attempts keeps it
_FIELD = re.compile(r"\{[a-z_]+\}")


def _bench_rlgpt_tasks() -> set[str]:
    default = inspect.signature(bench_rlgpt.main).parameters["tasks"].default
    return set(default.split(","))


def benchmark_names(describe: env_pb2.DescribeResponse) -> set[str]:
    """Every Crafter achievement (a benchmark over all of them is planned), the sub-tasks of every benchmark,
    and the prerequisites of those by the rules, as achievements and as the items and things they are about
    (an example about wood is about collect_wood)."""
    rules = describe.rules
    todo = [s[0] for s in BENCH_LLM_SUBTASKS] + list(BENCH_SKILLS_SUBTASKS) + sorted(_bench_rlgpt_tasks())
    names = set(describe.achievements)
    while todo:
        name = todo.pop()
        if name in names and name not in describe.achievements:
            continue
        names.add(name)
        rule = achievement_rule(rules, name)
        if rule is not None:
            things = [*rule.uses, *rule.holds, *rule.nearby]
            things += list(achievement_items(rules, name)) + [p.item for p in rules.place if p.achievement == name]
            things += list(rule.where) if name.startswith("collect_") else []
        else:  # an item: the rules that give it
            things = [w for way in ways_to_get(rules, name) for w in (*way.uses, *way.holds, *way.nearby)]
            things += [a for r in rules.collect if any(i.item == name for i in r.receives) for a in r.achievements]
            things += [r.achievement for r in (*rules.make, *rules.place) if r.item == name and r.achievement]
        todo += [t for t in things if t not in names]
    # Creatures of the benchmarks' creature sub-tasks (eat_cow is one of bench-skills').
    names |= {a.split("_", 1)[1] for a in names if a.startswith(("eat_", "defeat_")) and a in
              {*BENCH_SKILLS_SUBTASKS, *(s[0] for s in BENCH_LLM_SUBTASKS), *_bench_rlgpt_tasks()}}
    return names


@pytest.fixture(scope="module")
def rendered(env_server, describe, tmp_path_factory) -> dict[str, object]:
    """The four prompts for make_wood_pickaxe, as a run's second iteration renders them."""
    library = SkillLibrary(tmp_path_factory.mktemp("lib") / "library.json")
    library.add(LibrarySkill("get_wood", "Collect wood from the nearest trees until holding 3.", CHOP, 0.75,
                             "get_wood"))
    library.add(LibrarySkill("go_left", "Walk left for 60 frames.", WANDER, 0.25, "go_left"))
    subtasks = [
        planner_pb2.SubTask(name="get_wood", description="collect 3 wood", decision=planner_pb2.DECISION_CODE,
                            success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))]),
        planner_pb2.SubTask(name=TASK, description="place a table and make a wood pickaxe at it",
                            decision=planner_pb2.DECISION_RL, skills=["get_wood"],
                            success=[common_pb2.Condition(achievement=TASK)])]
    plan = planner_pb2.Plan(subtasks=subtasks, rationale="wood first, then the pickaxe", iteration=0)
    start = [common_pb2.ItemCount(item="wood", count=3)]
    feedback = ("The policy placed a table in 3/8 episodes but never made the pickaxe: after placing the table it "
                "held 1 wood, and it walked away from the table before using make_wood_pickaxe. Reward the "
                "make_wood_pickaxe achievement and shorten the episodes.")
    slow_prompt, slow_schema = SlowAgent(None, describe, library, PROTOCOL).prompt(
        common_pb2.TaskSpec(name=TASK), previous=plan,
        feedback=f"- get_wood (code): done, success 75%\n- {TASK} (rl): failed, success 0%; {feedback}")
    fast = FastAgent(None, env_server.stub, describe, library, seed=3, protocol=PROTOCOL)
    code_prompt = fast.skill_prompt(subtasks[1], previous_code=WANDER, error="(none)", feedback=feedback,
                                    start_inventory=start)
    previous = learner_pb2.RLConfig(name=TASK, primitive_actions=["move_left", "move_right", "do", "place_table"],
                                    skills=["get_wood", f"{TASK}__turn"], skill_max_steps=32, episode_length=500,
                                    env_frames=20000, reward_terms=[common_pb2.RewardTerm(kind="success", weight=10.0)])
    rl_prompt, rl_schema = fast.rl_prompt(subtasks[1], env_frames=20000, previous=previous, feedback=feedback,
                                          start_inventory=start, previous_macros={f"{TASK}__turn": TURN},
                                          curve=CURVE)
    previous_program = compile_program([{"op": "collect", "item": "wood", "count": 3}], describe)
    program = program_prompt(describe, PROTOCOL.with_rules(describe.rules), subtasks[1],
                             previous_code=previous_program, error="step 2 (make wood_pickaxe): needs a table",
                             feedback=feedback, start_inventory=start)
    # The critic judges a real test of a poor skill.
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="prompt_sample_wander", code=WANDER,
                                                               description="walks left", replace=True))
    result = env_server.stub.RunSkill(env_pb2.RunSkillRequest(
        skill="prompt_sample_wander", episodes=4, max_steps=300, seed=3,
        task=common_pb2.TaskSpec(name=TASK, success=list(subtasks[1].success), start_inventory=start)))
    request = critic_pb2.JudgeRequest(
        subtask=TASK, description=subtasks[1].description, success=list(subtasks[1].success),
        rollouts=list(result.episodes), code=WANDER, decision="code", rules=describe.rules, start_inventory=start,
        test_protocol=PROTOCOL.with_rules(describe.rules).judge_text("code", start))
    judge = Judge(CriticSettings())
    critic_prompt = judge.prompt(request, deterministic_checks(request, judge.settings))
    prompts = {"slow": slow_prompt, "fast_code": code_prompt, "fast_rl": rl_prompt, "critic": critic_prompt,
               "fast_program": program}
    out = os.environ.get("RLGPT_PROMPTS_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        for name, text in prompts.items():
            (Path(out) / f"{name}.txt").write_text(text)
    return {**prompts, "slow_schema": slow_schema, "rl_schema": rl_schema, "library": library, "describe": describe}


PROMPTS = ("slow", "fast_code", "fast_rl", "critic", "fast_program")


@pytest.mark.parametrize("name", PROMPTS)
def test_no_unfilled_field_no_enum_name_and_the_served_rules(rendered, describe, name) -> None:
    prompt = rendered[name]
    assert not _FIELD.findall(prompt), _FIELD.findall(prompt)
    assert "DECISION_" not in prompt and "TARGET_" not in prompt and "JOB_STATE" not in prompt
    assert describe.rules.text.strip() in prompt  # every game fact is the served rules
    [table] = [r for r in describe.rules.place if r.item == "table"]
    wood = next(u.count for u in table.uses if u.item == "wood")
    assert f"place_table: uses {wood} wood" in prompt
    assert "Game facts" not in prompt  # the hand-typed paragraph is gone


@pytest.mark.parametrize("name", ("slow", "fast_code", "fast_rl", "fast_program"))
def test_each_agent_is_told_how_its_answer_is_tested(rendered, name) -> None:
    prompt = rendered[name]
    assert "fresh, newly generated world" in prompt
    if name == "slow":
        assert "4 episodes of at most 300 frames" in prompt and "20000 frames" in prompt
    elif name in ("fast_code", "fast_program"):
        assert "tested on 4 episodes" in prompt and "at most 300 frames" in prompt
        assert "holding: 3 wood" in prompt
    else:
        assert "trains for 20000 frames" in prompt and "evaluated on 8 episodes" in prompt
        assert "holding: 3 wood" in prompt


def test_the_critic_reads_the_protocol_the_agent_read(rendered, describe) -> None:
    protocol = PROTOCOL.with_rules(describe.rules)
    assert protocol.code_test([common_pb2.ItemCount(item="wood", count=3)]) in rendered["critic"]
    assert protocol.code_test([common_pb2.ItemCount(item="wood", count=3)]) in rendered["fast_code"]
    assert "Items every test episode started with: 3 wood" in rendered["critic"]


def _library_section(prompt: str, header: str) -> set[str]:
    section = prompt.split(header, 1)[1].split("\n\n", 1)[0]
    return {m.group(1) for m in re.finditer(r"^- ([a-z0-9_]+):", section, re.MULTILINE)}


def _schema_skills(schema) -> set[str]:
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "skills":
                    items = value.get("items", {})
                    found.update(items.get("enum", []) or ([items["const"]] if "const" in items else []))
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema.model_json_schema())
    return found


def test_the_library_shown_is_the_library_the_schema_allows(rendered) -> None:
    library = {s.name for s in rendered["library"].all()}
    slow = _library_section(rendered["slow"], "Skill library")
    assert slow == _schema_skills(rendered["slow_schema"]) == library
    rl = _library_section(rendered["fast_rl"], "Coded skills that can join the action space")
    assert rl == _schema_skills(rendered["rl_schema"]) == library
    assert _library_section(rendered["fast_code"], "Skill library") == library
    assert "code:\n    def skill(agent):" in rendered["fast_code"]  # the relevant skill's code, to copy


def test_previous_answers_are_shown_in_the_answers_own_form(rendered) -> None:
    previous_plan = rendered["slow"].split("Previous plan (your last answer, in the answer's form):\n", 1)[1]
    plan = json.loads(previous_plan.split("\n", 1)[0])
    assert [st["decision"] for st in plan["subtasks"]] == ["code", "rl"]
    assert plan["subtasks"][0]["success"] == [{"item": "wood", "count": 3}]
    previous_config = rendered["fast_rl"].split("in the answer's form; its macro actions' code included):\n", 1)[1]
    config = json.loads(previous_config.split("\n", 1)[0])
    assert set(config) == {"primitive_actions", "skills", "macro_actions", "skill_max_steps", "reward_terms",
                           "episode_length", "env_frames", "observe", "end_on_success"}
    assert config["reward_terms"] == [{"kind": "success", "target": "", "weight": 10.0}]
    assert config["skills"] == ["get_wood"] and config["macro_actions"] == [{"name": "turn", "code": TURN}]
    rl_schema(*_describe_and_skills(rendered)).model_validate(config)  # a valid answer, as the prompt says


def _describe_and_skills(rendered) -> tuple[env_pb2.DescribeResponse, tuple[str, ...]]:
    return rendered["describe"], tuple(sorted(s.name for s in rendered["library"].all()))


def test_a_revision_sees_the_last_trainings_curve_and_the_verdict_in_a_prompt_of_reasonable_size(rendered) -> None:
    prompt = rendered["fast_rl"]
    curve = prompt.split("Learning curve of that training", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert curve[0] == "- 1000 frames: success 2%, mean return 0.25" and len(curve) == 7
    assert curve[-2] == "- 20000 frames: success 50%, mean return 5.00"
    # What the policy chose, each action by the answer's own name (its macro action as the model wrote it).
    assert curve[-1] == ("What the policy chose in its last training episodes (share of its decisions; the plan or a "
                         "macro action is one decision however many frames it plays): do 50%, turn 30%, get_wood 20%.")
    assert "Reward the make_wood_pickaxe achievement" in prompt.split("Critic feedback:", 1)[1]
    assert "`env_frames` (optional): train for fewer frames than that, at least 2000" in prompt
    assert "agent.step_to(name)" in prompt  # the served skill API, for the macro actions' code
    # 18,2xx with the observation vector's description (2026-11-27); 18,7xx with the schema's limits (2026-11-28);
    # 20,0xx with the rules' day and night, where creatures appear and how skeletons shoot (2026-11-29)
    assert len(prompt) < 20500, len(prompt)


def test_a_program_revision_sees_its_previous_program_and_error(rendered) -> None:
    prompt = rendered["fast_program"]
    shown = prompt.split("Previous program:\n", 1)[1].split("\n", 1)[0]
    assert json.loads(shown) == [{"op": "collect", "item": "wood", "count": 3}]  # the program, not its code
    assert "step 2 (make wood_pickaxe): needs a table" in prompt.split("Error of the previous program:", 1)[1]
    assert "def skill" not in prompt and len(prompt) < 9000, len(prompt)


def test_the_code_prompts_state_the_schemas_limit_on_code(rendered) -> None:
    code = f"code {SKILL_CODE_LIMITS['min_length']:,} to {SKILL_CODE_LIMITS['max_length']:,} characters"
    assert code in " ".join(rendered["fast_code"].split())
    assert f"at most {SKILL_CODE_LIMITS['max_length']:,} characters" in " ".join(rendered["fast_rl"].split())
    assert f"macro_actions[].{code}" in " ".join(rendered["fast_rl"].split())


def test_feedback_is_never_cut_mid_sentence(rendered) -> None:
    assert "shorten the episodes." in rendered["fast_code"] and "shorten the episodes." in rendered["fast_rl"]


def _examples(path: Path) -> list[str]:
    """The examples of a prompt template: each line that introduces one, the lines after it up to and with the
    first JSON line (the example answer)."""
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    found = []
    for i, line in enumerate(lines):
        if line.startswith(("Example", "The answer's form")):
            end = next(j for j in range(i, len(lines)) if lines[j].startswith("{"))
            found.append("\n".join(lines[i:end + 1]))
    return found


CRITIC_TEMPLATE = CRITIC_PROMPT_DIR / "critic.txt"
WITHOUT_EXAMPLES = {"fast_agent_program", "fast_agent_kept_plan", "fast_agent_kept_plan_revision", "one_agent_program",
                    "program_steps", "fast_agent_game_kept_plan"}
ALL_TEMPLATES = (*sorted(PROMPT_DIR.glob("*.txt")), CRITIC_TEMPLATE)


@pytest.mark.parametrize("path", ALL_TEMPLATES, ids=lambda p: p.stem)
def test_no_example_is_a_benchmark_subtask_or_an_achievement(describe, path) -> None:
    examples = _examples(path)
    if path.stem in WITHOUT_EXAMPLES:  # the schema shows the form; small models copied any example given
        assert not examples and "Example" not in path.read_text(), path
        return
    assert examples, path
    names = benchmark_names(describe)
    for example in examples:
        words = set(re.findall(r"[a-z][a-z0-9_]*", example))
        assert not words & names, (path.name, sorted(words & names))


def test_examples_are_valid_answers_that_act_from_the_first_frame(env_server, describe) -> None:
    code_example = json.loads(_examples(PROMPT_DIR / "fast_agent_code.txt")[0].splitlines()[-1])
    skill = SkillAnswer.model_validate(code_example)
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="example_sand", code=skill.code,
                                                               description=skill.description, replace=True))
    never = common_pb2.TaskSpec(name="collect_diamond")  # never holds in 300 frames: the skill's return ends it
    result = env_server.stub.RunSkill(env_pb2.RunSkillRequest(skill="example_sand", episodes=4, max_steps=300,
                                                              seed=11, task=never))
    for episode in result.episodes:
        assert not episode.HasField("error") or not episode.error.type, episode.error
        runs = [line for line in episode.text.splitlines()[1:] if line.split(" ")[0] in describe.actions]
        assert runs and runs[0].startswith("move_"), episode.text[:300]  # it acts from the first frame
    # It ends next to sand (it returns when facing sand) in most worlds within the test's frames.
    assert sum(e.end_reason == "skill_finished" for e in result.episodes) >= 3, [e.text[-300:] for e in result.episodes]

    rl_line = _examples(PROMPT_DIR / "fast_agent_rl.txt")[0].splitlines()[-1]
    rl_example = json.loads(rl_line.replace("{idle_and_moves}", idle_and_moves(describe)))
    config = rl_schema(describe, ()).model_validate(rl_example)
    assert {t.kind for t in config.reward_terms} <= set(describe.reward_kinds)
    critic_examples = _examples(CRITIC_TEMPLATE)
    assert [CriticAnswer.model_validate(json.loads(e.splitlines()[-1])).target for e in critic_examples] == \
        ["fast", "keep"]
    # The examples agree: the critic's advice in its example is what the fast agent's example does, and coding a
    # walk to a seen material is what the slow agent's guidance calls "code".
    assert "step_to('sand')" in critic_examples[0] and 'step_to("sand")' in code_example["code"]
    assert "walking to the nearest" in (PROMPT_DIR / "slow_agent.txt").read_text()


def test_the_rl_prompt_says_what_the_observation_vector_holds_as_the_env_serves_it(rendered) -> None:
    vector = next(f for f in rendered["describe"].observation if f.name == "vector")
    assert "threat/x" in vector.labels and "threat/x" in vector.description  # the env's own words
    observable = rendered["fast_rl"].split("by\ngroup or by name ([] for all of them): ", 1)[1].split(". The", 1)[0]
    assert "threat (threat/seen, threat/x, threat/y)" in observable
    assert f"What they hold: {vector.description}" in rendered["fast_rl"].replace("\n", " ")
