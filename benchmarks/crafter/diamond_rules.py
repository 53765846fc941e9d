"""Fixed rules around the kept plan (make bench-diamond-rules): the fast agent's macro actions used by a simple
rule instead of a trained policy, on the held-out worlds the chain alone and the policies are scored on.

APPO around the kept plan has not beaten the chain alone (bench-diamond). This probe asks whether the actions it
was given could, used the obvious way: fight when the plan hands control back, shelter at night, make a sword
early. A rule that clearly beats the chain says the policy has something to learn that it did not; rules that do
not say the actions themselves are the limit. The rules read only what the policy sees (the observation vector,
by Describe's labels) and what a step returns; the macro actions are the fast agent's own code (its answer),
nothing typed here.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import queue
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.progress import Progress

from benchmarks.crafter.diamond import (
    AGENT_MACRO_PREFIX,
    SKILL_PREFIX,
    RecordedPlan,
    agent_skills,
    apply_agent_answer,
    describe_of,
    outcome,
    plan_config,
)
from benchmarks.crafter.run import EPISODE_LENGTH, start_env_servers
from rlgpt import env_contract
from rlgpt.env_client import RemoteSession
from rlgpt.env_contract import PLAN_ACTION
from rlgpt.v1 import env_pb2, learner_pb2
from services.learner.evaluate import Chooser, play

log = logging.getLogger("benchmarks.crafter")
ANSWER = Path("docs/runs/claude-relay-collect_diamond-kept-plan/answer-interrupt.json")
"""The fast agent's answer for RL around the kept plan with interrupts: its macro actions are the rules' tools."""
NIGHT = 0.3
"""world/daylight below this is night (Crafter's zombies spawn most in the dark)."""


@dataclasses.dataclass(frozen=True)
class Tools:
    """The answer's macro actions each rule may use, by their names in the answer."""

    fight: str = "fight_threat"
    shelter: str = "shelter_and_sleep"
    sword: str = "make_sword"
    sword_after: str = "make_stone_pickaxe"
    """The plan stage after which the sword rule makes its sword (the plan's own stage name)."""


PARTS = {
    "sword": "the sword macro once, as soon as the plan's make_stone_pickaxe stage is done",
    "shelter": f"at night (world/daylight below {NIGHT}), the shelter macro, again as long as it acts",
    "fight": "after a plan action that handed control back (the answer's interrupts: hurt, or a threat near), the "
             "fight macro once, then the plan again",
}
"""What each part of a rule does; a rule's first part that applies chooses (in this order), else the plan."""
RULES: dict[str, tuple[str, ...]] = {"chain": (), "fight": ("fight",), "shelter": ("shelter",),
                                     "shelter+fight": ("shelter", "fight"), "sword": ("sword",),
                                     "sword+fight": ("sword", "fight")}
"""Each rule's parts."""


def rule_text(rule: str) -> str:
    """What a rule does, as the report and the revision prompt say it."""
    parts = RULES[rule]
    return "; otherwise ".join(PARTS[p] for p in PARTS if p in parts) if parts else \
        "every action the plan action (the chain alone)"


class Rule:
    """Chooses each env's next action from its last step (``PARTS`` says what each part does)."""

    def __init__(self, name: str, actions: list[str], labels: list[str], stages: list[str], tools: Tools):
        if name not in RULES:
            raise ValueError(f"unknown rule {name!r}; one of {', '.join(RULES)}")
        self.name, self.parts = name, set(RULES[name])
        self.plan = actions.index(PLAN_ACTION)
        macro = {part: f"{env_contract.SKILL_PREFIX}{AGENT_MACRO_PREFIX}{getattr(tools, part)}" for part in self.parts}
        if missing := [m for m in macro.values() if m not in actions]:
            raise ValueError(f"rule {name}: the answer has no macro action "
                             f"{missing[0].removeprefix(env_contract.SKILL_PREFIX)}")
        self.macro = {part: actions.index(m) for part, m in macro.items()}
        self.shelter_name = AGENT_MACRO_PREFIX + tools.shelter
        self.daylight = labels.index("world/daylight")
        self.sword_stage = stages.index(SKILL_PREFIX + tools.sword_after)
        self.sworded: set[int] = set()

    def next(self, i: int, info: env_pb2.StepInfo, vector: Any, frames: int) -> int:
        """Env ``i``'s next action after a step that took ``frames`` frames and ended with ``info`` and ``vector``."""
        if ("sword" in self.parts and i not in self.sworded and len(info.stages_done) > self.sword_stage
                and info.stages_done[self.sword_stage]):
            self.sworded.add(i)
            return self.macro["sword"]
        # The shelter macro again while it acts; one that gave up at once (nowhere to dig) leaves it to the plan.
        if "shelter" in self.parts and vector[self.daylight] < NIGHT and not (info.skill == self.shelter_name
                                                                               and frames <= 1):
            return self.macro["shelter"]
        if "fight" in self.parts and info.plan_interrupted:
            return self.macro["fight"]
        return self.plan

    def choose(self, live: list[int], pixels: Any, vectors: Any,
               last: Mapping[int, tuple[env_pb2.StepInfo, int]]) -> list[int]:
        """The live envs' next actions (an evaluation chooser: the plan before an env's first step)."""
        return [self.next(i, last[i][0], vectors[row], last[i][1]) if i in last else self.plan
                for row, i in enumerate(live)]


def play_rule(target: str, config: learner_pb2.RLConfig, rule_name: str, tools: Tools, episodes: int,
              first_seed: int) -> dict[str, Any]:
    """The rule's first episode on ``episodes`` worlds from ``first_seed``, as :func:`outcome` reports one."""
    started = time.time()

    def rule_of(session: RemoteSession) -> Chooser:
        labels = list(session.fields["vector"].labels)
        return Rule(rule_name, list(session.actions), labels, [s.skill for s in config.plan], tools).choose

    response = play(config, target, episodes, first_seed, chooser=rule_of, client=f"bench-diamond-rules:{rule_name}",
                    max_frames=episodes * EPISODE_LENGTH)
    return outcome(response, sum(e.steps for e in response.episodes), time.time() - started)


def rules_config(plan: RecordedPlan, answer: dict[str, Any], describe: env_pb2.DescribeResponse
                 ) -> learner_pb2.RLConfig:
    """The kept plan with the answer applied as a training would apply it (its macro actions, its K and its
    interrupts: the rules play by them)."""
    config = plan_config(plan, 1000, 0)
    apply_agent_answer(config, answer, describe)
    return config


def run_rules(plan: RecordedPlan, answer: dict[str, Any], work: Path, rules: list[str], episodes: int, first_seed: int,
              progress: Progress, tools: Tools = Tools(), parallel: int = 2) -> dict[str, Any]:
    """Every rule on the same worlds from ``first_seed``, ``parallel`` at a time, each on an env server of its
    own; the answer's K and interrupts."""
    skills = {**{SKILL_PREFIX + name: code for name, code, _ in plan.steps}, **agent_skills(answer)}
    bare = plan_config(plan, 1000, 0)
    bare.skills.extend(agent_skills(answer))  # every env server gets them with the plan's skills
    servers, _ = start_env_servers(min(parallel, len(rules)), work / "logs", skills, bare)
    task = progress.add_task("rules", total=len(rules))
    results: dict[str, Any] = {}
    free: queue.Queue[str] = queue.Queue()
    for server in servers:
        free.put(server.target)

    def on_a_free_server(rule: str) -> dict[str, Any]:  # one rule per server process at a time (its own GIL)
        target = free.get()
        try:
            return play_rule(target, config, rule, tools, episodes, first_seed)
        finally:
            free.put(target)

    try:
        config = rules_config(plan, answer, describe_of(servers[0].target))
        with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
            futures = {pool.submit(on_a_free_server, rule): rule for rule in rules}
            for future in concurrent.futures.as_completed(futures):
                rule = futures[future]
                results[rule] = future.result()
                progress.advance(task)
                log.info("rule %s: %.1f%% of %d worlds", rule, 100 * results[rule]["success_rate"], episodes)
    finally:
        for server in servers:
            server.stop()
    return {"task": plan.task, "llm": plan.llm, "run": plan.run, "k": config.skill_max_steps, "night": NIGHT,
            "threat_within": config.plan_interrupt.threat_within, "hurt": config.plan_interrupt.damage,
            "first_seed": first_seed, "tools": dataclasses.asdict(tools),
            "rules": {rule: rule_text(rule) for rule in rules}, "macro_actions": sorted(agent_skills(answer)),
            "results": {rule: results[rule] for rule in rules}}


def load_answer(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
