"""The task-level controller: the final evaluation of E whole-task episodes.

When every sub-task of the plan is coded, one chain skill runs the sub-tasks' skills in plan order (RunSkill);
when some are learned, the last RL sub-task's policy, whose action space holds the earlier sub-tasks' skills, is
evaluated on the whole task (Evaluate). The result lands in the run's state as a
:class:`~services.planner.state.FinalResult`.
"""

from __future__ import annotations

import ast

import grpc

from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner.context import RunContext
from services.planner.state import Decision, FinalResult, RunState

FINAL_SEED_OFFSET = 1000
"""The final evaluation's worlds are seeded apart from the sub-tasks' tests and evaluations."""
CHAIN_CONTROLLER = "chain of coded skills"
NO_CONTROLLER = "none: no sub-policy finished"


class _Rename(ast.NodeTransformer):
    """Renames the given top-level functions, at their definitions and wherever their names are used."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.names.get(node.name, node.name)
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node


def chain_skill(codes: list[tuple[str, str]]) -> str:
    """One skill that runs the given ``(name, code)`` skills in order.

    Each skill's top-level functions get the suffix ``_<index>`` (parsed, so strings such as an action name that
    equals a function name and attributes such as ``agent.<name>`` stay as they are); its entry is ``skill``, or
    its last function. Raises SyntaxError for a skill that does not parse."""
    parts, entries = [], []
    for index, (name, code) in enumerate(codes):
        tree = ast.parse(code)
        functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
        if not functions:
            raise SyntaxError(f"skill {name} defines no function")
        entry = "skill" if "skill" in functions else functions[-1]
        tree = _Rename({fn: f"{fn}_{index}" for fn in functions}).visit(tree)
        entries.append(f"{entry}_{index}")
        parts.append(f"# --- {name}\n{ast.unparse(tree)}\n")
    body = "\n".join(f"    yield from {entry}(agent)" for entry in entries)
    return "\n".join(parts) + f"\n\ndef skill(agent):\n{body}\n"


def rl_jobs(plan: planner_pb2.Plan | None, state: RunState) -> list[tuple[str, str]]:
    """``(sub-task, job id)`` of the plan's trained RL sub-tasks, in plan order."""
    return [(st.name, state.subtasks[st.name].job_id) for st in (plan.subtasks if plan else [])
            if state.subtasks[st.name].decision == Decision.RL and state.subtasks[st.name].job_id]


def coded_skills(plan: planner_pb2.Plan | None, state: RunState) -> list[tuple[str, str]]:
    """``(sub-task, code)`` of the plan's coded sub-tasks that have code, in plan order."""
    return [(st.name, state.subtasks[st.name].skill_code) for st in (plan.subtasks if plan else [])
            if state.subtasks[st.name].decision == Decision.CODE and state.subtasks[st.name].skill_code]


def final_evaluation(ctx: RunContext) -> FinalResult:
    """Evaluates the whole task with the controller the finished plan allows."""
    plan = ctx.state.plan_proto()
    task = ctx.run.request.task
    whole = common_pb2.TaskSpec(name=task.name, description=task.description, success=list(task.success))
    episodes, seed = ctx.budgets.eval_episodes, ctx.seed + FINAL_SEED_OFFSET
    final = FinalResult(episodes=episodes, frames_used=ctx.state.frames_used, controller=NO_CONTROLLER)
    jobs, codes = rl_jobs(plan, ctx.state), coded_skills(plan, ctx.state)
    if jobs and ctx.stubs.learner is not None:
        name, job_id = jobs[-1]
        result = ctx.stubs.learner.Evaluate(learner_pb2.EvaluateRequest(
            job_id=job_id, episodes=episodes, seed=seed, task=whole), timeout=3600)
        final.controller = f"policy of {name} (job {job_id}) on the whole task"
        final.success_rate, final.returns = result.success_rate, list(result.returns)
    elif codes and (plan is None or len(codes) == len(plan.subtasks)):
        final.controller = CHAIN_CONTROLLER
        try:
            source = chain_skill(codes)
        except SyntaxError as exc:
            final.error = f"SyntaxError: {exc}"
            return final
        (ctx.run.dir / "chain_skill.py").write_text(source)
        skill = f"chain_{ctx.run.id[-6:]}"
        try:
            ctx.stubs.env.RegisterSkill(env_pb2.RegisterSkillRequest(
                name=skill, code=source, replace=True, description="the run's coded sub-task skills in plan order"))
            result = ctx.stubs.env.RunSkill(env_pb2.RunSkillRequest(
                skill=skill, episodes=min(episodes, 64), seed=seed, max_steps=ctx.settings.final_episode_frames,
                task=whole))
        except grpc.RpcError as exc:
            final.error = f"{exc.code().name}: {exc.details()}"
            return final
        final.success_rate, final.returns = result.success_rate, [e.episode_return for e in result.episodes]
    return final
