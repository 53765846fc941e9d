"""collect_diamond with a kept plan (make bench-diamond): an RL-GPT run's plan for collect_diamond, each sub-task
a skill its LLM wrote, run alone as the all-code chain on held-out worlds, and APPO trained around it
(``RLConfig.plan``: the plan is one macro action next to the primitives, and the policy learns when to let it act
and when to fight, flee, eat, drink or sleep), scored on the same worlds.

The plan and its skills are read from the run's directory (``state.json``: the last plan, each sub-task's best
code and success conditions; ``recorded.json``: which model answered); nothing in them is typed here.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from rich.progress import Progress

from benchmarks.common import REPO_ROOT
from benchmarks.crafter.run import (
    EPISODE_LENGTH,
    read_episodes,
    start_env_servers,
    train_job,
    training_seconds,
    training_span,
)
from rlgpt import worlds
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2, planner_pb2
from services.learner.jobs import read_progress
from services.learner.rl_config import epochs, minibatches
from services.planner.agents.fast import FastAgent
from services.planner.agents.kept_plan import KeptPlanRevision, apply_answer, kept_plan_answer, kept_plan_prompt
from services.planner.controller import failed_episodes
from services.planner.kept_plan import KEPT_PLAN_PRIOR, own_reward_text
from services.planner.prompts import EvalProtocol
from services.planner.schemas import kept_plan_schema
from services.planner.skill_library import SkillLibrary

log = logging.getLogger("benchmarks.crafter")
PLAN_RUN = REPO_ROOT / "docs" / "runs" / "claude-relay-collect_diamond"
"""A capable model's recorded RL-GPT run on collect_diamond (through the relay, replayable with --replay)."""
NUM_WORKERS, ENVS_PER_WORKER = 2, 8
SKILL_PREFIX = "diamond_"
"""Registered names of the plan's skills: the sub-task's name with this prefix (apart from other libraries)."""
K = 16
"""Frames of one plan action: how often the policy may step in."""
REWARD = (("stage", 1.0), ("success", 10.0), ("death", -1.0), ("health", 0.1))
"""Each sub-task of the plan done pays 1, the diamond 10, dying costs 1, and health lost or regained counts a
little (Crafter's own reward weighs it so), so that damage is felt when it happens, not only at death."""
PRIMITIVES = ("noop", "move_left", "move_right", "move_up", "move_down", "do", "sleep", "place_stone")
"""What the policy does besides letting the plan act: move (flee), do (fight, drink, eat), sleep, wall off with
stone. The crafting primitives are left to the plan's skills."""


AGENT_MACRO_PREFIX = "diamond_macro_"
"""Registered names of the macro actions of the fast agent's answer."""


@dataclasses.dataclass(frozen=True)
class RecordedPlan:
    task: str
    llm: str
    run: str
    steps: tuple[tuple[str, str, tuple[dict[str, Any], ...]], ...]
    """(sub-task name, its skill's code, its success conditions as JSON), in plan order."""
    plan: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The plan as state.json holds it (the planner's Plan as JSON)."""
    success: tuple[dict[str, Any], ...] = ()
    """The task's success conditions as JSON (the run's request)."""


def load_plan(run_dir: Path) -> RecordedPlan:
    """The last plan of a recorded RL-GPT run with each sub-task's code; ValueError when a sub-task has none."""
    state = json.loads((run_dir / "state.json").read_text())
    recorded = json.loads((run_dir / "recorded.json").read_text()) if (run_dir / "recorded.json").exists() else {}
    steps = []
    for subtask in state["plan"]["subtasks"]:
        code = state["subtasks"][subtask["name"]].get("skill_code", "")
        if not code:
            raise ValueError(f"{run_dir}: sub-task {subtask['name']} has no code; a kept plan needs a skill per step")
        steps.append((subtask["name"], code, tuple(subtask["success"])))
    request = json.loads((run_dir / "request.json").read_text())
    task = recorded.get("task") or request["task"]["name"]
    return RecordedPlan(task=task, llm=str(recorded.get("model", "unknown")), run=str(run_dir), steps=tuple(steps),
                        plan=state["plan"],  # a task named by its achievement alone succeeds with it
                        success=tuple(request["task"].get("success", ())) or ({"achievement": task},))


PLAN_SKILLS_RUN = "until they return"
"""How the env server ran plan skills, kept with the results: from 2026-11-27 a suspended plan skill resumes even
if its stage got done meanwhile (the chain alone plays the same at any K); before, it ran until its stage was done
at a K boundary, so the chain alone depended on K."""
PRIOR_HEAD = "bias and weights x0.01"
"""How the learner starts the policy on the plan (services/learner/model.make_actor_critic), kept with the results:
runs before 2026-11-27 set the bias alone, so the start was the prior only on average over the random weights."""


def plan_config(plan: RecordedPlan, frames: int, seed: int, k: int = K,
                reward: tuple[tuple[str, float], ...] = REWARD, plan_prior: float = 0.0,
                interrupt: common_pb2.PlanInterrupt | None = None) -> learner_pb2.RLConfig:
    steps = [learner_pb2.PlanStep(skill=SKILL_PREFIX + name,
                                  success=[json_format.ParseDict(c, common_pb2.Condition()) for c in conditions])
             for name, _, conditions in plan.steps]
    return learner_pb2.RLConfig(
        name=f"{plan.task}-kept-plan", backend="crafter",
        task=common_pb2.TaskSpec(name=plan.task, terminate_on_success=True), plan=steps,
        primitive_actions=list(PRIMITIVES),
        reward_terms=[common_pb2.RewardTerm(kind=kind, weight=weight) for kind, weight in reward],
        episode_length=EPISODE_LENGTH, env_frames=frames, num_workers=NUM_WORKERS, envs_per_worker=ENVS_PER_WORKER,
        seed=seed, skill_max_steps=k, plan_prior=plan_prior, plan_interrupt=interrupt)


def outcome(response: learner_pb2.EvaluateResponse, frames: int, seconds: float) -> dict[str, Any]:
    """What a controller did on the held-out worlds: success, per plan step reached / done, how episodes ended."""
    return {"episodes": len(response.episodes), "success_rate": response.success_rate,
            "frames": frames, "seconds": seconds,
            "links": [json_format.MessageToDict(link, preserving_proto_field_name=True,
                                                always_print_fields_with_no_presence=True) for link in response.links],
            "ends": [{"success": e.success, "end_reason": e.end_reason, "death_cause": e.death_cause,
                      "steps": e.steps} for e in response.episodes],
            "actions": dict(sorted(response.action_shares.items(), key=lambda item: -item[1]))}


def play_plan_alone(target: str, config: learner_pb2.RLConfig, episodes: int,
                    first_seed: int) -> tuple[learner_pb2.EvaluateResponse, float]:
    """The plan with nobody stepping in (every action the plan action), ``episodes`` worlds from ``first_seed``;
    the episodes' summaries (recorded: their text too) and the seconds it took."""
    from services.learner.evaluate import play

    started = time.time()
    response = play(config, target, episodes, first_seed, client="bench-diamond:chain",
                    max_frames=episodes * EPISODE_LENGTH)
    return response, time.time() - started


def chain_alone(target: str, config: learner_pb2.RLConfig, episodes: int, seed: int) -> dict[str, Any]:
    """The plan alone on the worlds the policy is scored on."""
    response, seconds = play_plan_alone(target, config, episodes, worlds.held_out_worlds(seed))
    return outcome(response, sum(e.steps for e in response.episodes), seconds)


def policy_on(job_dir: Path, target: str, episodes: int, seed: int, greedy: bool = False) -> dict[str, Any]:
    from services.learner.evaluate import evaluate

    started = time.time()
    response = evaluate(job_dir, target, episodes, worlds.held_out_worlds(seed), max_frames=episodes * EPISODE_LENGTH,
                        greedy=greedy, sampling_seed=seed)
    return outcome(response, sum(e.steps for e in response.episodes), time.time() - started)


def training_curve(job_dir: Path, window: int = 200) -> list[dict[str, Any]]:
    """Success rate, plan steps done, deaths and the share of the policy's decisions per action over windows of
    training episodes, against the env frames by then."""
    episodes = sorted(read_episodes(job_dir), key=lambda e: e["time"])
    points, frames = [], 0
    for start in range(0, len(episodes) - window + 1, window):
        chunk = episodes[start:start + window]
        frames += sum(int(e["frames"]) for e in chunk)
        point = {"frames": frames, "success_rate": sum(bool(e["success"]) for e in chunk) / len(chunk),
                 "stages_done": sum(int(e.get("stages_done", 0)) for e in chunk) / len(chunk),
                 "deaths": sum(e.get("end_reason") == "death" for e in chunk) / len(chunk)}
        choices = Counter()
        for e in chunk:
            choices.update(e.get("actions", {}))  # episodes recorded before 2026-11-27 18:00 have none
        if total := sum(choices.values()):
            point["actions"] = {name: n / total for name, n in choices.most_common()}
        points.append(point)
    return points


def describe_of(target: str) -> env_pb2.DescribeResponse:
    channel = create_channel(target, default_timeout=60)
    try:
        return env_pb2_grpc.EnvServiceStub(channel).Describe(env_pb2.DescribeRequest(backend="crafter"))
    finally:
        channel.close()


def agent_prompt(plan: RecordedPlan, work: Path, frames: int, seed: int, episodes: int,
                 revision: KeptPlanRevision | None = None) -> str:
    """The planner's prompt to the fast agent for RL around this plan, as a run would render it: the chain alone
    played on briefing worlds (neither trained nor scored on) tells how and where it fails; with ``revision``, the
    config it revises and how that did."""
    config = plan_config(plan, frames, seed)
    servers, _ = start_env_servers(1, work / "logs", {SKILL_PREFIX + name: code for name, code, _ in plan.steps},
                                   config)
    try:
        response, _ = play_plan_alone(servers[0].target, config, episodes, worlds.briefing_worlds(seed))
        describe = describe_of(servers[0].target)
    finally:
        servers[0].stop()
    protocol = EvalProtocol(eval_episodes=episodes, final_frames=EPISODE_LENGTH)
    fast = FastAgent(None, None, describe, SkillLibrary(work / "unused-library.json"), protocol=protocol)
    task = common_pb2.TaskSpec(name=plan.task, success=[json_format.ParseDict(c, common_pb2.Condition())
                                                        for c in plan.success])
    prompt, _ = kept_plan_prompt(fast, task, json_format.ParseDict(plan.plan, planner_pb2.Plan()),
                                 success_rate=response.success_rate, failed=failed_episodes(list(response.episodes)),
                                 env_frames=frames, own_reward=own_reward_text(), revision=revision)
    return prompt


def macro_label(registered: str) -> str:
    """A skill the bench registered, by its own name: the plan's skills and the fast agent's macro actions without
    the bench's registry prefixes."""
    return registered.removeprefix(AGENT_MACRO_PREFIX).removeprefix("diamond_")


def agent_skills(answer: dict[str, Any]) -> dict[str, str]:
    """The registered name -> code of an answer's macro actions (checked against the schema once registered)."""
    return {AGENT_MACRO_PREFIX + str(m.get("name", "")): str(m.get("code", ""))
            for m in answer.get("macro_actions", [])}


def apply_agent_answer(config: learner_pb2.RLConfig, answer: dict[str, Any],
                       describe: env_pb2.DescribeResponse) -> None:
    """A fast agent's answer checked against its schema (Describe's enums) and applied as the planner applies one:
    its primitives, macro actions (registered names), K, interrupts and reward terms."""
    parsed = kept_plan_answer(kept_plan_schema(describe).model_validate(answer))
    apply_answer(config, parsed, list(agent_skills(answer)))


def hands_back(answer: dict[str, Any]) -> bool:
    """Whether a fast agent's answer has its plan actions hand control back early (hurt, a threat near): its run
    then belongs with the bench's own run with interrupts."""
    return bool(answer.get("hand_back_when_hurt") or answer.get("hand_back_within"))


def job_updates(job_dir: Path, updates: tuple[int, int]) -> tuple[int, int]:
    """Passes over each batch and minibatches per pass for the job in ``job_dir``: ``updates`` when given, else
    those a job being resumed began with (its ``config.json``), else (0, 0): the learner's defaults."""
    path = job_dir / "config.json"
    if any(updates) or not read_progress(job_dir) or not path.exists():
        return updates
    began = json.loads(path.read_text())["config"]
    if "num_epochs" not in began:
        log.warning("%s began under the learner's defaults of its day; resuming with today's (%s)", job_dir.name,
                    "give --epochs and --minibatches to choose")
    return int(began.get("num_epochs", 0)), int(began.get("num_minibatches", 0))


def run_diamond(plan: RecordedPlan, work: Path, frames: int, seed: int, timeout: float, progress: Progress,
                eval_episodes: int, k: int = K, reward: tuple[tuple[str, float], ...] = REWARD,
                answer: dict[str, Any] | None = None, plan_prior: float = 0.0,
                interrupt: common_pb2.PlanInterrupt | None = None, tag: str = "",
                updates: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """Registers the plan's skills, scores the chain alone, trains (or resumes) APPO around the plan and scores
    the policy on the same held-out worlds. ``answer``: the fast agent's config for it (its primitives, macro
    actions, K, interrupts and reward terms after the plan's stage and success terms) started on the plan as the
    planner's is (:data:`KEPT_PLAN_PRIOR`), in the job ``kept-plan-agent`` (``-interrupt`` when it has them); without
    it the bench's own (``k``, ``reward``, :data:`PRIMITIVES`). ``plan_prior``: the untrained policy's probability
    of the plan action (``RLConfig.plan_prior``), in the job ``kept-plan-prior``; with ``interrupt`` (when a plan
    action hands control back early, ``RLConfig.plan_interrupt``) in the job ``kept-plan-interrupt``. ``tag``: a
    run of its own, its job's name ending in ``-<tag>`` (never resuming the untagged run's job). ``updates``:
    passes over each batch and minibatches per pass (``RLConfig.num_epochs``, ``num_minibatches``; 0: the
    learner's defaults)."""
    interrupting = interrupt is not None and (interrupt.damage or interrupt.threat_within > 0)
    if answer is not None:  # as the planner trains around a kept plan: the policy starts on the plan
        plan_prior = KEPT_PLAN_PRIOR
        job_dir = work / ("kept-plan-agent-interrupt" if hands_back(answer) else "kept-plan-agent")
    else:
        job_dir = work / ("kept-plan-interrupt" if interrupting else "kept-plan-prior" if plan_prior else "kept-plan")
    if tag:
        job_dir = job_dir.with_name(f"{job_dir.name}-{tag}")
    job_dir.mkdir(parents=True, exist_ok=True)
    config = plan_config(plan, frames, seed, k, reward, plan_prior, interrupt)
    config.num_epochs, config.num_minibatches = job_updates(job_dir, updates)
    skills = {SKILL_PREFIX + name: code for name, code, _ in plan.steps}
    macros = agent_skills(answer) if answer is not None else {}
    config.skills.extend(macros)  # so that every env server gets them with the plan's skills
    started = time.time()
    # a controller plays all its held-out worlds in one session
    servers, _ = start_env_servers(NUM_WORKERS, work / "logs", {**skills, **macros}, config,
                                   session_envs=max(eval_episodes, ENVS_PER_WORKER))
    try:
        if answer is not None:
            apply_agent_answer(config, answer, describe_of(servers[0].target))
        describe = describe_of(servers[0].target)
        threats = list(describe.threats)
        vector = [list(f.labels) for f in describe.observation if f.name == "vector"]
        chain = chain_alone(servers[0].target, config, eval_episodes, seed)
        log.info("the chain alone: %.1f%% of %d held-out worlds", 100 * chain["success_rate"], chain["episodes"])
        # written out, so that a resumed job keeps them when the learner's defaults change between runs
        config.num_epochs, config.num_minibatches = epochs(config), minibatches(config, "cpu")
        rc = train_job(job_dir, config, servers, timeout, progress, "kept plan + APPO")
        policy = policy_on(job_dir, servers[0].target, eval_episodes, seed)
        greedy = policy_on(job_dir, servers[0].target, eval_episodes, seed, greedy=True)
        log.info("APPO around the plan: %.1f%% of the same worlds sampling, %.1f%% greedy",
                 100 * policy["success_rate"], 100 * greedy["success_rate"])
    finally:
        for server in servers:
            server.stop()
    episodes = read_episodes(job_dir)
    records = read_progress(job_dir)
    last = records[-1] if records else {}
    return {"task": plan.task, "llm": plan.llm, "run": plan.run, "steps": [name for name, _, _ in plan.steps],
            "k": config.skill_max_steps, "plan_prior": round(config.plan_prior, 4),
            "prior_head": PRIOR_HEAD if config.plan_prior else "",
            "interrupt": {"damage": config.plan_interrupt.damage,
                          "threat_within": config.plan_interrupt.threat_within, "threats": threats},
            "plan_skills_run": PLAN_SKILLS_RUN, "vector_labels": vector[0] if vector else [],
            "observe": list(config.observe),
            "reward": [[t.kind, round(t.weight, 4), *([t.target] if t.target else [])] for t in config.reward_terms],
            "primitives": list(config.primitive_actions), "macro_actions": macros, "budget": frames,
            "frames": int(last.get("env_frames", 0)), "complete": int(last.get("env_frames", 0)) >= frames,
            "train_episodes": len(episodes), "rc": rc, "wall_s": time.time() - started,
            "train_s": training_seconds(records), "trained": training_span(records),
            "updates": {"epochs": epochs(config), "minibatches": minibatches(config, "cpu")},
            "chain": chain, "policy": policy, "policy_greedy": greedy, "curve": training_curve(job_dir),
            "job_dir": str(job_dir)}
