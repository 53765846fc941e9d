"""The task-level (long-horizon) controller: the plan run as a chain, evaluated on the whole task.

Each sub-task of the plan is one link with its controller: its coded skill, or its trained policy. In each episode
a link acts until its sub-task's success conditions hold or its frames are spent, then the next link starts; the
episode counts when the whole task's conditions hold. When a plan has a trained policy the learner runs the chain
(``EvaluateRequest.chain``: several checkpoints and skills in one session); an all-code plan runs as one chain skill
on the env server (RunSkill). The same evaluation runs after every outer iteration (success per iteration) and at
the end (:class:`~services.planner.state.FinalResult`).
"""

from __future__ import annotations

import ast
import logging
from collections import Counter
from typing import Any

import grpc

from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner.context import RunContext
from services.planner.state import Decision, FinalResult, RunState, SubTaskState

log = logging.getLogger(__name__)
FINAL_SEED_OFFSET = 1000
"""The final evaluation's worlds are seeded apart from the sub-tasks' tests and evaluations."""
CHAIN_CONTROLLER = "chain of coded skills"
NO_CONTROLLER = "none: no sub-task has a skill or a trained policy yet"
FAILED_TAILS, TAIL_LINES = 3, 12
"""Failed chain episodes whose trajectory's last lines are kept (for the fast agent's RL around the plan)."""


class _Rename(ast.NodeTransformer):
    """Renames the given top-level names (functions, classes, constants) at their definitions and wherever
    they are used; attributes (``agent.<name>``) and strings stay as they are."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.names.get(node.name, node.name)
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self.visit(node.args)  # defaults are evaluated outside the function
        # A parameter or local of the same name as a top-level one shadows it inside this function.
        args = node.args
        local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
        local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        local -= {name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names}
        outer, self.names = self.names, {k: v for k, v in self.names.items() if k not in local}
        node.body = [self.visit(statement) for statement in node.body]
        self.names = outer
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        node.args = self.visit(node.args)
        outer = self.names
        self.names = {k: v for k, v in outer.items() if k not in {a.arg for a in ast.walk(node.args)
                                                                    if isinstance(a, ast.arg)}}
        node.body = self.visit(node.body)
        self.names = outer
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.name = self.names.get(node.name, node.name)
        self.generic_visit(node)
        return node

    def visit_Global(self, node: ast.Global) -> ast.Global:
        node.names = [self.names.get(name, name) for name in node.names]  # `global X` names the renamed X
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node


def _top_level_names(tree: ast.Module) -> list[str]:
    """Every name a module binds at its top level: a skill's constants (each compiled program has its own
    SUCCESS) would otherwise be overwritten by the next skill's in one chain module."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return list(dict.fromkeys(names))


def chain_skill(codes: list[tuple[str, str]]) -> str:
    """One skill that runs the given ``(name, code)`` skills in order.

    Each skill's top-level names (functions, classes, constants) get the suffix ``_<index>`` (parsed, so strings
    such as an action name that equals a function name and attributes such as ``agent.<name>`` stay as they
    are); its entry is ``skill``, or its last function. A function or constant identical to one an earlier skill
    defined, down to what it refers to, is not repeated: compiled skill programs each carry the same runtime, and
    ten of them would pass the env's code limit. Raises SyntaxError for a skill that does not parse."""
    parts, entries = [], []
    defined: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}  # a definition's key -> its name in the chain
    for index, (name, code) in enumerate(codes):
        tree = ast.parse(code)
        functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
        if not functions:
            raise SyntaxError(f"skill {name} defines no function")
        entry = "skill" if "skill" in functions else functions[-1]
        names = {top: f"{top}_{index}" for top in _top_level_names(tree)}
        shareable = _shareable(tree)
        reused: set[int] = set()
        found = True
        while found:  # a definition can be reused once what it refers to is
            found = False
            for position, node in enumerate(tree.body):
                own = _definition_name(node)
                if own in shareable and position not in reused and (key := _definition_key(node, names)) in defined:
                    names[own], found = defined[key], True
                    reused.add(position)
        for position, node in enumerate(tree.body):
            if (own := _definition_name(node)) in shareable and position not in reused:
                defined.setdefault(_definition_key(node, names), names[own])
        tree.body = [node for position, node in enumerate(tree.body) if position not in reused]
        tree = _Rename(names).visit(tree)
        entries.append(names[entry])
        parts.append(f"# --- {name}\n{ast.unparse(tree)}\n")
    body = "\n".join(f"    yield from {entry}(agent)" for entry in entries)
    return "\n".join(parts) + f"\n\ndef skill(agent):\n{body}\n"


def _definition_name(node: ast.stmt) -> str | None:
    """The name a function or a one-name constant defines (what a chain may share); None for anything else."""
    if isinstance(node, ast.FunctionDef):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    return None


def _shareable(tree: ast.Module) -> set[str]:
    """Names a chain may share with an earlier skill's: functions, and constants bound to a literal, each bound once at
    the top level and never rebound through ``global`` (a shared name mutated by one skill would change another)."""
    counts = Counter(name for node in tree.body if (name := _definition_name(node)))
    rebound = {name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names}
    literal = {name for node in tree.body if (name := _definition_name(node))
               and (isinstance(node, ast.FunctionDef) or isinstance(node.value, ast.Constant))}
    return {name for name in literal if counts[name] == 1} - rebound


def _definition_key(node: ast.stmt, names: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A definition's source (parsed) and where each other top-level name it refers to points in the chain (its own
    name is in its source: a recursive function shared calls the shared one, the same code)."""
    own = _definition_name(node)
    refers = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in names and n.id != own}
    return ast.dump(node), tuple(sorted((ref, names[ref]) for ref in refers))


def policy_of(sub: SubTaskState) -> str:
    """The trained policy a sub-task's link runs: the one whose evaluation measured best (every evaluation of a
    sub-task uses the same worlds), the latest among equals; the latest training when none was evaluated. A
    revision that trained worse never replaces a better policy in the chain."""
    evaluated = [(float(t.get("success_rate", 0.0)), i, t["job_id"]) for i, t in enumerate(sub.tests)
                 if t.get("job_id") and not t.get("error")]
    return max(evaluated)[2] if evaluated else sub.job_id


def rl_jobs(plan: planner_pb2.Plan | None, state: RunState) -> list[tuple[str, str]]:
    """``(sub-task, job id)`` of the plan's trained RL sub-tasks (:func:`policy_of`), in plan order."""
    return [(st.name, policy_of(state.subtasks[st.name])) for st in (plan.subtasks if plan else [])
            if state.subtasks[st.name].decision == Decision.RL and state.subtasks[st.name].job_id]


def coded_skills(plan: planner_pb2.Plan | None, state: RunState) -> list[tuple[str, str]]:
    """``(sub-task, code)`` of the plan's sub-tasks whose controller is their code, in plan order: coded ones
    with code, and ones just moved to RL that have code but no trained policy yet (the chain as it stands)."""
    return [(st.name, sub.skill_code) for st in (plan.subtasks if plan else [])
            if (sub := state.subtasks[st.name]).skill_code
            and (sub.decision == Decision.CODE or not sub.job_id)]


ITERATION_SEED_OFFSET = 2000
"""Per-iteration evaluations use their own worlds (the same ones every iteration, so iterations compare)."""


def chain_links(plan: planner_pb2.Plan | None, state: RunState, *, skill_frames: int,
                skill_names: dict[str, str]) -> tuple[list[learner_pb2.ChainLink], list[str]]:
    """The plan's links in order, and the sub-tasks left out because they have no controller yet.

    A coded sub-task runs its latest code (registered under ``skill_names[name]``) for at most ``skill_frames``
    (what its tests gave it); an RL sub-task its best trained policy (:func:`policy_of`) for at most its training
    episode length."""
    links, missing = [], []
    for st in plan.subtasks if plan else []:
        sub = state.subtasks[st.name]
        link = learner_pb2.ChainLink(name=st.name, success=list(st.success))
        if sub.decision == Decision.RL and sub.job_id:
            link.job_id = policy_of(sub)
            link.max_frames = int(sub.rl_config.get("episode_length", 0) or 0)
        elif st.name in skill_names:
            link.skill = skill_names[st.name]
            link.max_frames = skill_frames
        else:
            missing.append(st.name)
            continue
        links.append(link)
    return links, missing


def _chain_skill_name(ctx: RunContext, subtask: str) -> str:
    return f"{subtask[:40]}__chain{ctx.run.id[-6:]}"


def evaluate_chain(ctx: RunContext, *, episodes: int, seed: int, label: str) -> FinalResult:
    """Evaluates the plan as it stands as a chain on the whole task (``label`` names the evaluation in logs)."""
    plan = ctx.state.plan_proto()
    task = ctx.run.request.task
    whole = common_pb2.TaskSpec(name=task.name, description=task.description, success=list(task.success))
    result = FinalResult(episodes=episodes, frames_used=ctx.state.frames_used, controller=NO_CONTROLLER)
    jobs, codes = rl_jobs(plan, ctx.state), coded_skills(plan, ctx.state)
    if not jobs:
        if codes and (plan is None or len(codes) == len(plan.subtasks)):
            return _skill_chain(ctx, codes, whole, result, seed)
        if not codes:
            return result
    if ctx.stubs.learner is None:
        result.error = "the plan has trained policies and this planner has no learner to run them"
        return result
    names: dict[str, str] = {}
    try:
        for name, code in codes:
            names[name] = _chain_skill_name(ctx, name)
            ctx.stubs.env.RegisterSkill(env_pb2.RegisterSkillRequest(
                name=names[name], code=code, replace=True, description=f"{name}: its code in the run's chain"))
    except grpc.RpcError as exc:
        result.error = f"{exc.code().name}: {exc.details()}"
        return result
    links, missing = chain_links(plan, ctx.state, skill_frames=ctx.settings.test_steps, skill_names=names)
    result.controller = "chain: " + " -> ".join(
        f"{link.name} ({'policy ' + link.job_id if link.job_id else 'code'})" for link in links)
    if missing:
        result.controller += f"; without a controller yet: {', '.join(missing)}"
    return learner_evaluation(ctx, learner_pb2.EvaluateRequest(
        chain=links, task=whole, episodes=episodes, seed=seed, episode_length=ctx.settings.final_episode_frames),
        result, label)


def learner_evaluation(ctx: RunContext, request: learner_pb2.EvaluateRequest, result: FinalResult,
                       label: str) -> FinalResult:
    """``result`` filled from the learner's Evaluate (success, returns, per link or plan step how far episodes
    got); a refusal is the result's error, a learner that is gone pauses the run (the error propagates)."""
    assert ctx.stubs.learner is not None
    try:
        response = ctx.stubs.learner.Evaluate(request, timeout=3600)
    except grpc.RpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise  # the learner is gone: the run pauses, resumable
        result.error = f"{exc.code().name}: {exc.details()}"
        log.warning("%s evaluation failed: %s", label, result.error)
        return result
    result.success_rate, result.returns = response.success_rate, list(response.returns)
    result.links = [{"name": s.name, "reached": s.reached, "succeeded": s.succeeded,
                     "mean_frames": round(s.mean_frames, 1)} for s in response.links]
    return result


def _skill_chain(ctx: RunContext, codes: list[tuple[str, str]], whole: common_pb2.TaskSpec, result: FinalResult,
                 seed: int) -> FinalResult:
    """An all-code plan: one skill running the sub-tasks' skills in plan order (RunSkill)."""
    result.controller = CHAIN_CONTROLLER
    try:
        source = chain_skill(codes)
    except SyntaxError as exc:
        result.error = f"SyntaxError: {exc}"
        return result
    (ctx.run.dir / "chain_skill.py").write_text(source)
    skill = f"chain_{ctx.run.id[-6:]}"
    try:
        ctx.stubs.env.RegisterSkill(env_pb2.RegisterSkillRequest(
            name=skill, code=source, replace=True, description="the run's coded sub-task skills in plan order"))
        response = ctx.stubs.env.RunSkill(env_pb2.RunSkillRequest(
            skill=skill, episodes=min(result.episodes, 64), seed=seed, max_steps=ctx.settings.final_episode_frames,
            task=whole))
    except grpc.RpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise
        result.error = f"{exc.code().name}: {exc.details()}"
        return result
    result.success_rate, result.returns = response.success_rate, [e.episode_return for e in response.episodes]
    result.failed = failed_episodes(list(response.episodes))
    return result


def failed_episodes(episodes: list[common_pb2.EpisodeSummary], tails: int = FAILED_TAILS,
                    tail_lines: int = TAIL_LINES) -> list[dict[str, Any]]:
    """How each failed episode ended, what it had done by then, and for the first ``tails`` of them the last
    ``tail_lines`` lines of its trajectory."""
    failed = []
    for e in episodes:
        if e.success:
            continue
        record: dict[str, Any] = {"end_reason": e.end_reason, "death_cause": e.death_cause, "steps": e.steps,
                                  "achievements": list(e.achievements),
                                  "inventory": {i.item: i.count for i in e.final_inventory}}
        if len(failed) < tails and e.text:
            record["tail"] = e.text.splitlines()[-tail_lines:]
        failed.append(record)
    return failed


def final_evaluation(ctx: RunContext) -> FinalResult:
    """The whole task's final evaluation: the finished plan's chain on worlds apart from every test."""
    return evaluate_chain(ctx, episodes=ctx.budgets.eval_episodes, seed=ctx.seed + FINAL_SEED_OFFSET, label="final")


def iteration_evaluation(ctx: RunContext) -> FinalResult:
    """The chain after an outer iteration (the paper's success per iteration)."""
    return evaluate_chain(ctx, episodes=ctx.budgets.eval_episodes, seed=ctx.seed + ITERATION_SEED_OFFSET,
                          label=f"iteration {ctx.state.outer_iteration}")
