"""What coding already failed: the success conditions of sub-tasks whose coded attempts all fell below the pass bar
and moved to RL (:meth:`InnerLoops._give_up`), kept in ``state.coding_failed``. A later plan that decides "code" for
the same conditions (under any name: the slow agent's answer, or a step the rules' repair added, which is coded) is
kept "rl" by the planner, and the plan's rationale and the slow agent's next summary say why: the planner does not
hand back to code what coding failed (bench-rlgpt's collect_stone: a re-plan made make_wood_pickaxe code again after
four coded attempts at 0%, and the link after it waited for it in both outer iterations)."""

from __future__ import annotations

import logging

from rlgpt.prompts import conditions_text
from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.state import Decision, RunState, SubTaskState

log = logging.getLogger(__name__)


def conditions_key(conditions: list[common_pb2.Condition]) -> str:
    """The conditions in words, in a fixed order: the same conditions give the same key under any sub-task name."""
    return " and ".join(sorted(conditions_text([c]) for c in conditions))


def remember(state: RunState, st: planner_pb2.SubTask, sub: SubTaskState) -> None:
    """``st``'s conditions as failed by coding (its sub-task just moved from code to RL): in which outer iteration,
    under which name, after how many coded attempts and the best of their success rates."""
    coded = [t for t in sub.tests if t.get("kind") == Decision.CODE]
    state.coding_failed[conditions_key(list(st.success))] = {
        "subtask": st.name, "iteration": state.outer_iteration, "attempts": len(coded),
        "best": max((t.get("success_rate", 0.0) for t in coded), default=0.0)}


def why(record: dict[str, object]) -> str:
    """Why a sub-task stays "rl", from its record in ``state.coding_failed``."""
    return (f"coding failed for these conditions in iteration {record['iteration']} ({record['subtask']}: "
            f"{record['attempts']} coded attempts, the best at {float(record['best']):.0%})")


def kept_rl(plan: planner_pb2.Plan, state: RunState) -> planner_pb2.Plan:
    """``plan`` with every sub-task decided "code" whose conditions coding already failed decided "rl" instead;
    the rationale names each one and why."""
    kept = []
    for st in plan.subtasks:
        record = state.coding_failed.get(conditions_key(list(st.success)))
        if record is not None and st.decision != planner_pb2.DECISION_RL:
            st.decision = planner_pb2.DECISION_RL
            kept.append(f"{st.name} ({why(record)})")
    if kept:
        log.info("kept rl by the planner: %s", "; ".join(kept))
        plan.rationale = f"{plan.rationale} | kept rl by the planner: {'; '.join(kept)}".strip(" |")
    return plan


def note(st: planner_pb2.SubTask, state: RunState) -> str:
    """For the slow agent's summary: why ``st`` is "rl" when coding already failed its conditions ("" otherwise)."""
    record = state.coding_failed.get(conditions_key(list(st.success)))
    kept = record is not None and state.subtasks[st.name].decision == Decision.RL
    return f"kept rl by the planner: {why(record)}" if kept else ""
