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
from pathlib import Path
from typing import Any

from rich.progress import Progress

from benchmarks.crafter.diamond import (
    AGENT_MACRO_PREFIX,
    SKILL_PREFIX,
    RecordedPlan,
    agent_skills,
    outcome,
    plan_config,
)
from benchmarks.crafter.run import EPISODE_LENGTH, start_env_servers
from rlgpt.env_client import PLAN_ACTION
from rlgpt.grpc_client import create_channel
from rlgpt.tensors import from_tensor
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2
from services.learner.plan_progress import PlanProgress
from services.learner.policy import EVAL_SEED_OFFSET, FirstEpisodes
from services.learner.sf_env import session_request

log = logging.getLogger("benchmarks.crafter")
ANSWER = Path("docs/runs/claude-relay-collect_diamond-kept-plan/answer-interrupt.json")
"""The fast agent's answer for RL around the kept plan with interrupts: its macro actions are the rules' tools."""
NIGHT = 0.3
"""world/daylight below this is night (Crafter's zombies spawn most in the dark)."""
K = 60
"""Frames of one plan or macro action (the answer's own K): the plan plays the same at any K."""
THREAT_WITHIN = 3
"""A plan action hands control back when a threat is this close (or the player is hurt), as in the answer."""


@dataclasses.dataclass(frozen=True)
class Tools:
    """The answer's macro actions each rule may use, by their names in the answer."""

    fight: str = "fight_threat"
    shelter: str = "shelter_and_sleep"
    sword: str = "make_sword"
    sword_after: str = "make_stone_pickaxe"
    """The plan stage after which the sword rule makes its sword (the plan's own stage name)."""


RULES = {
    "chain": "every action the plan action (the chain alone)",
    "fight": f"after a plan action that handed control back (hurt, or a threat {THREAT_WITHIN} cells away or "
             "closer), the fight macro once, then the plan again",
    "shelter": f"at night (world/daylight below {NIGHT}), the shelter macro, again as long as it acts",
    "shelter+fight": "the shelter rule, and otherwise the fight rule",
    "sword": "the sword macro once, as soon as the plan's make_stone_pickaxe stage is done",
    "sword+fight": "the sword rule, and otherwise the fight rule",
}
"""Each rule, as the report describes it."""


class Rule:
    """Chooses each env's next action from the last step (``RULES`` says what each does)."""

    def __init__(self, name: str, actions: list[str], labels: list[str], stages: list[str], tools: Tools):
        if name not in RULES:
            raise ValueError(f"unknown rule {name!r}; one of {', '.join(RULES)}")
        self.name = name
        self.plan = actions.index(PLAN_ACTION)
        macro = {role: actions.index(f"skill:{AGENT_MACRO_PREFIX}{getattr(tools, role)}")
                 for role in ("fight", "shelter", "sword")}
        self.fight, self.shelter, self.sword = macro["fight"], macro["shelter"], macro["sword"]
        self.shelter_name = AGENT_MACRO_PREFIX + tools.shelter
        self.daylight = labels.index("world/daylight")
        self.sword_stage = stages.index(SKILL_PREFIX + tools.sword_after)
        self.sworded: set[int] = set()

    def next(self, i: int, info: env_pb2.StepInfo, vector: Any, frames: int) -> int:
        """Env ``i``'s next action after a step that took ``frames`` frames and ended with ``info`` and ``vector``."""
        rule = self.name
        if ("sword" in rule and i not in self.sworded and len(info.stages_done) > self.sword_stage
                and info.stages_done[self.sword_stage]):
            self.sworded.add(i)
            return self.sword
        # The shelter macro again while it acts; one that gave up at once (nowhere to dig) leaves it to the plan.
        if "shelter" in rule and vector[self.daylight] < NIGHT and not (info.skill == self.shelter_name
                                                                         and frames <= 1):
            return self.shelter
        if "fight" in rule and info.plan_interrupted:
            return self.fight
        return self.plan


def play_rule(target: str, config: learner_pb2.RLConfig, rule_name: str, tools: Tools, episodes: int,
              first_seed: int) -> dict[str, Any]:
    """The rule's first episode on ``episodes`` worlds from ``first_seed``, as :func:`outcome` reports one."""
    started = time.time()
    channel = create_channel(target, default_timeout=600)
    stub = env_pb2_grpc.EnvServiceStub(channel)
    session = stub.CreateSession(session_request(config, first_seed, num_envs=episodes, record=True,
                                                 autoreset=True, client=f"bench-diamond-rules:{rule_name}"))
    try:
        labels = next(list(f.labels) for f in session.observation if f.name == "vector")
        rule = Rule(rule_name, list(session.actions), labels, [s.skill for s in config.plan], tools)
        first = FirstEpisodes(episodes)
        progress = PlanProgress([s.skill for s in config.plan], episodes)
        chosen = {i: rule.plan for i in range(episodes)}
        live = first.live
        while live and first.frames < episodes * EPISODE_LENGTH:
            step = stub.Step(env_pb2.StepRequest(session_id=session.session_id, actions=[chosen[i] for i in live],
                                                 env_indices=live))
            first.record(step, live)
            progress.record(step, live)
            vectors = from_tensor(step.observations.vector)
            for row, i in enumerate(live):
                chosen[i] = rule.next(i, step.infos[row], vectors[row], step.frames[row])
            live = first.live
    finally:
        stub.CloseSession(env_pb2.CloseSessionRequest(session_id=session.session_id))
        channel.close()
    response = first.response(progress.links())
    return outcome(response, sum(e.steps for e in response.episodes), time.time() - started)


def rules_config(plan: RecordedPlan, answer: dict[str, Any], k: int = K) -> learner_pb2.RLConfig:
    """The kept plan with the answer's macro actions and its interrupts (hurt, a threat within
    ``THREAT_WITHIN``)."""
    config = plan_config(plan, 1000, 0, k, interrupt=common_pb2.PlanInterrupt(damage=True, threat_within=THREAT_WITHIN))
    config.skills.extend(agent_skills(answer))
    config.primitive_actions[:] = ["noop"]
    return config


def run_rules(plan: RecordedPlan, answer: dict[str, Any], work: Path, rules: list[str], episodes: int, seed: int,
              progress: Progress, tools: Tools = Tools(), k: int = K, parallel: int = 2) -> dict[str, Any]:
    """Every rule on the same held-out worlds (the learner's evaluation seeds: those bench-diamond scores on),
    ``parallel`` at a time, each on an env server of its own."""
    config = rules_config(plan, answer, k)
    skills = {**{SKILL_PREFIX + name: code for name, code, _ in plan.steps}, **agent_skills(answer)}
    servers, _ = start_env_servers(min(parallel, len(rules)), work / "logs", skills, config)
    task = progress.add_task("rules", total=len(rules))
    results: dict[str, Any] = {}
    free: queue.Queue[str] = queue.Queue()
    for server in servers:
        free.put(server.target)

    def on_a_free_server(rule: str) -> dict[str, Any]:  # one rule per server process at a time (its own GIL)
        target = free.get()
        try:
            return play_rule(target, config, rule, tools, episodes, seed + EVAL_SEED_OFFSET)
        finally:
            free.put(target)

    try:
        with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
            futures = {pool.submit(on_a_free_server, rule): rule for rule in rules}
            for future in concurrent.futures.as_completed(futures):
                rule = futures[future]
                results[rule] = future.result()
                progress.advance(task)
                log.info("rule %s: %.1f%% of %d held-out worlds", rule, 100 * results[rule]["success_rate"],
                         episodes)
    finally:
        for server in servers:
            server.stop()
    return {"task": plan.task, "llm": plan.llm, "run": plan.run, "k": k, "night": NIGHT, "threat_within": THREAT_WITHIN,
            "tools": dataclasses.asdict(tools), "rules": {rule: RULES[rule] for rule in rules},
            "macro_actions": sorted(agent_skills(answer)), "results": {rule: results[rule] for rule in rules}}


def load_answer(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
