"""A final controller played on the whole game, one episode per world of a declared set, with the learner's own
evaluation code: a code plan as bench-diamond plays a plan alone (``play_plan_alone``: every action the plan
action), a chain as the learner's Evaluate runs one (``evaluate_chain``), a policy as it evaluates a job
(``evaluate``). The task is the env server's whole-game task (``ResolveTask``: Crafter's episodes, until death or
its length), whatever task the run had.
"""

from __future__ import annotations

import logging
from typing import Any

from google.protobuf import json_format

from benchmarks.crafter.diamond import play_plan_alone
from benchmarks.game.controller import CHAIN, CODE_PLAN, FinalController
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, learner_pb2

log = logging.getLogger("benchmarks.game")
GAME_TASK = "crafter"
"""The env server's name of the whole-game task."""
PLAN_K = 64
"""Frames of one plan action of a code plan (how the env server's plan is stepped; the plan plays the same at any
K: a suspended skill resumes)."""


def game_task(target: str, episode_length: int = 0) -> tuple[common_pb2.TaskSpec, list[str]]:
    """The whole-game task as the env server resolves it (``episode_length``: shorter episodes, for tests only) and
    the game's achievements (Describe)."""
    channel = create_channel(target, default_timeout=60, wait_ready_seconds=60)
    try:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        task = stub.ResolveTask(env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name=GAME_TASK))).task
        achievements = list(stub.Describe(env_pb2.DescribeRequest(backend="crafter")).achievements)
    finally:
        channel.close()
    if episode_length:
        task.episode_length = episode_length
    return task, achievements


def register(target: str, skills: dict[str, str]) -> None:
    """The controller's skills on the env server, under the names it runs them by."""
    channel = create_channel(target, default_timeout=120, wait_ready_seconds=60)
    try:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        for name, code in skills.items():
            stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True,
                                                            description="bench-game: a run's final controller"))
    finally:
        channel.close()


def _conditions(success: Any) -> list[common_pb2.Condition]:
    return [json_format.ParseDict(c, common_pb2.Condition()) for c in success]


def play(controller: FinalController, target: str, task: common_pb2.TaskSpec, first_seed: int,
         episodes: int, guards: list[common_pb2.Guard] | None = None) -> learner_pb2.EvaluateResponse:
    """The controller's first episode on each of ``episodes`` worlds from ``first_seed`` (its skills registered);
    ``guards`` (their skills registered) take over from its coded skills (a code plan's or a chain's)."""
    from services.learner.chain import evaluate_chain
    from services.learner.evaluate import evaluate

    length = int(task.episode_length)
    max_frames = episodes * length
    if controller.kind == CODE_PLAN:
        config = learner_pb2.RLConfig(
            name=f"{controller.task}-final-plan", backend="crafter", task=task, episode_length=length,
            reward_terms=list(task.reward_terms), skill_max_steps=PLAN_K,
            plan=[learner_pb2.PlanStep(skill=skill, success=_conditions(success))
                  for skill, success in controller.plan], guards=guards or [])
        response, _ = play_plan_alone(target, config, episodes, first_seed)
    elif controller.kind == CHAIN:
        request = learner_pb2.EvaluateRequest(
            chain=[json_format.ParseDict(link, learner_pb2.ChainLink()) for link in controller.links], task=task,
            episodes=episodes, seed=first_seed, episode_length=length, guards=guards or [])
        response = evaluate_chain(request, controller.job_dirs, target, max_frames=max_frames)
    else:
        if guards:
            raise ValueError("guards take over from coded skills: a policy's own controller has none to guard")
        response = evaluate(controller.job_dirs[controller.job_id], target, episodes, first_seed,
                            max_frames=max_frames, task=task, episode_length=length)
    if len(response.episodes) != episodes:
        raise RuntimeError(f"{len(response.episodes)} of {episodes} episodes ended within {max_frames:,} frames")
    return response

