"""Pure rules over plans: the task as one sub-task, completing a plan with the task's own goal, what earlier
sub-tasks leave in the inventory (from the world's rules), and the summary the slow agent reads."""

from __future__ import annotations

from rlgpt.prompts import shorten
from rlgpt.v1 import common_pb2, planner_pb2
from rlgpt.world_rules import achievement_items
from services.planner import coding_failed
from services.planner.state import Decision, RunState

SUMMARY_FEEDBACK_CHARS = 400


def task_subtask(task: common_pb2.TaskSpec, decision: Decision) -> planner_pb2.SubTask:
    """The whole task as one sub-task, with the task's success conditions (which the env server spelled out
    when the run started)."""
    return planner_pb2.SubTask(name=task.name or "task", description=task.description or task.name,
                               success=list(task.success), decision=decision.proto)


def ending_in_goal(plan: planner_pb2.Plan, goal: planner_pb2.SubTask) -> planner_pb2.Plan:
    """A plan whose last sub-task does not reach the task's own success condition cannot solve the task
    (weak models plan side quests): ``goal`` (the task as a sub-task, with the decision the caller chose) is
    appended as the last link of the chain, under a name no other sub-task has."""
    wanted = {c.SerializeToString(deterministic=True) for c in goal.success}
    if plan.subtasks and wanted <= {c.SerializeToString(deterministic=True) for c in plan.subtasks[-1].success}:
        return plan
    goal = planner_pb2.SubTask(name=goal.name, description=goal.description, success=list(goal.success),
                               decision=goal.decision)
    taken = {st.name for st in plan.subtasks}
    while goal.name in taken:
        goal.name += "_goal"
    plan.subtasks.append(goal)
    said = "the task itself was appended as the last sub-task: the plan did not end in the task's success condition"
    if said not in plan.rationale:  # a re-asked plan keeps the first one's notes: said once
        plan.rationale = f"{plan.rationale} | {said}".strip(" |")
    return plan


def implied_items(conditions: list[common_pb2.Condition], rules: common_pb2.WorldRules,
                  items: set[str]) -> dict[str, int]:
    """What holding a sub-task's success conditions leaves in the inventory (for the next sub-task's tests).

    An inventory condition leaves its count; an achievement leaves what the rule that unlocks it gives
    (``rlgpt.world_rules.achievement_items``: collect_wood -> 1 wood, make_wood_pickaxe -> 1 wood_pickaxe); placing
    leaves nothing. Only inventory items count (status values such as drink are not given).
    """
    found: dict[str, int] = {}
    for c in conditions:
        if c.WhichOneof("kind") == "inventory":
            gained = {c.inventory.item: c.inventory.count}
        else:
            gained = achievement_items(rules, c.achievement)
        for item, count in gained.items():
            if item in items:
                found[item] = max(found.get(item, 0), count)
    return found


def start_inventory(plan: planner_pb2.Plan, subtask: planner_pb2.SubTask, rules: common_pb2.WorldRules,
                    items: set[str]) -> list[common_pb2.ItemCount]:
    """What the sub-tasks before ``subtask`` leave in the inventory: where its tests and trainings start."""
    given: dict[str, int] = {}
    for earlier in plan.subtasks:
        if earlier.name == subtask.name:
            break
        for item, count in implied_items(list(earlier.success), rules, items).items():
            given[item] = max(given.get(item, 0), count)
    return [common_pb2.ItemCount(item=k, count=v) for k, v in sorted(given.items())]


def summary(plan: planner_pb2.Plan, state: RunState) -> str:
    """One line per sub-task for the slow agent: decision, status, success, the critic's feedback and, where coding
    already failed its conditions, why the planner keeps it rl."""
    lines = []
    for st in plan.subtasks:
        s = state.subtasks[st.name]
        feedback = shorten(s.feedback, SUMMARY_FEEDBACK_CHARS)  # whole sentences, never cut mid-word
        kept = coding_failed.note(st, state)  # why the planner keeps it rl, whatever the plan decides
        lines.append(f"- {st.name} ({s.decision}): {s.status}, success {s.success_rate:.0%}"
                     f"{'; ' + feedback if feedback else ''}{'; ' + kept if kept else ''}")
    return "\n".join(lines)
