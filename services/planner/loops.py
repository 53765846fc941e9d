"""The two loops of RL-GPT (paper, Algorithm 1) and the task-level controller.

Inner loop, per sub-task, at most I iterations: the fast agent writes code (tested through
RunSkill) or an RL config (trained by the learner, then evaluated), the critic judges, the fast
agent revises with the verdict. Outer loop, at most O iterations: the critic's summaries go back
to the slow agent, which may move sub-tasks between code and RL, split or reorder them; a sub-task
whose code fails every inner iteration moves to RL on its own. Every decision, record, code
version, config, curve and verdict lands in the run directory (``state.json``, ``events.jsonl``,
``attempts/``), and a resumed run skips what is done.

Modes (the paper's ablations): ``rl-gpt`` (both), ``pure-code`` (every sub-task coded),
``pure-rl`` (one RL training on the whole task, primitives only, no LLM). Agent setups: ``one``
(no slow agent: the whole task is one sub-task; no critic), ``slow-fast`` (no critic), and
``slow-fast-critic``.

Task-level controller (the final evaluation of E whole-task episodes): when the chain is all code,
one chain skill runs the sub-tasks' skills in order (RunSkill); otherwise the last RL sub-task's
policy, whose action space holds the earlier sub-tasks' skills, is evaluated on the whole task.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from typing import Any

import grpc
from google.protobuf import json_format

from rlgpt import metrics
from rlgpt.config import PlannerSettings
from rlgpt.errors import FailedPrecondition, RlgptError
from rlgpt.llm.client import StructuredOutputError, record_from_json
from rlgpt.prompts import CompletesJSON, shorten
from rlgpt.v1 import (
    common_pb2,
    critic_pb2,
    critic_pb2_grpc,
    env_pb2,
    env_pb2_grpc,
    learner_pb2,
    learner_pb2_grpc,
    planner_pb2,
)
from rlgpt.world_rules import achievement_items
from services.planner.agents import FastAgent, SlowAgent
from services.planner.budgets import resolve_budgets
from services.planner.prompts import EvalProtocol
from services.planner.runs import Run
from services.planner.skill_library import SkillLibrary
from services.planner.state import RunState, SubTaskState

log = logging.getLogger(__name__)
SUMMARY_FEEDBACK_CHARS = 400
_DEF = re.compile(r"^def\s+(\w+)\s*\(", re.MULTILINE)


@dataclasses.dataclass
class Stubs:
    """The services the loops call; learner and critic are optional (setups without them)."""

    env: env_pb2_grpc.EnvServiceStub
    learner: learner_pb2_grpc.LearnerServiceStub | None
    critic: critic_pb2_grpc.CriticServiceStub | None


class StopRequested(Exception):
    """StopRun was called; the run saves its state and ends resumable."""


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


def chain_skill(codes: list[tuple[str, str]]) -> str:
    """One skill that runs the given skills in order: each entry function renamed, then a `skill` calling them."""
    parts, names = [], []
    for index, (name, code) in enumerate(codes):
        renamed = code
        for fn in _DEF.findall(code):
            renamed = re.sub(rf"\b{re.escape(fn)}\b", f"{fn}_{index}", renamed)
        entry = "skill" if "def skill(" in code else _DEF.findall(code)[-1]
        names.append(f"{entry}_{index}")
        parts.append(f"# --- {name}\n{renamed.strip()}\n")
    body = "\n".join(f"    yield from {n}(agent)" for n in names)
    return "\n".join(parts) + f"\n\ndef skill(agent):\n{body}\n"


class TwoLoops:
    """Runs one RL-GPT run to its end (or until stopped), resumable from its state."""

    def __init__(self, run: Run, state: RunState, describe: env_pb2.DescribeResponse, llm: CompletesJSON | None,
                 library: SkillLibrary, stubs: Stubs, settings: PlannerSettings):
        request = run.request
        self.run, self.state, self.describe, self.stubs, self.settings = run, state, describe, stubs, settings
        self.mode = request.mode or "rl-gpt"
        self.agents = request.agents or "slow-fast-critic"
        budgets = resolve_budgets(request.budgets, settings)  # the planner's defaults where the request has none
        self.outer = budgets.max_outer_iterations
        self.inner = budgets.max_inner_iterations
        self.eval_episodes = budgets.eval_episodes
        self.candidates = budgets.candidates
        self.frames_per_training = budgets.env_frames_per_training
        self.total_frames = budgets.total_env_frames
        self.max_tokens = budgets.max_tokens
        self.final_frames = settings.final_episode_frames
        self.library = library
        self.protocol = EvalProtocol(test_episodes=settings.test_episodes, test_steps=settings.test_steps,
                                     env_frames=self.frames_per_training, eval_episodes=self.eval_episodes,
                                     final_frames=self.final_frames).with_rules(describe.rules)
        self.slow = SlowAgent(llm, describe, library, self.protocol) if llm is not None else None
        self.fast = (FastAgent(llm, stubs.env, describe, library, seed=request.seed, protocol=self.protocol)
                     if llm is not None else None)
        self.items = set(describe.items)
        (run.dir / "attempts").mkdir(exist_ok=True)

    # --- bookkeeping --------------------------------------------------------------------------------
    def _check_stop(self) -> None:
        if self.run.stop_requested.is_set():
            raise StopRequested()
        if self.max_tokens and self.run.tokens >= self.max_tokens:
            raise FailedPrecondition(f"the run used {self.run.tokens} LLM tokens, its budget ({self.max_tokens})")

    def _frames_left(self) -> int | None:
        return None if not self.total_frames else max(0, self.total_frames - self.state.frames_used)

    def _spend(self, subtask: SubTaskState, frames: int) -> None:
        self.state.frames_used += frames
        subtask.frames += frames

    def _save(self) -> None:
        self.state.save(self.run.dir)
        self.run.save_status()

    def _attempt_file(self, name: str, payload: dict[str, Any]) -> None:
        path = self.run.dir / "attempts" / f"iter{self.state.outer_iteration}_{name}.json"
        path.write_text(json.dumps(payload, indent=1))

    # --- entry --------------------------------------------------------------------------------------
    def execute(self) -> None:
        if self.state.finished:
            return
        self._register_known_skills()
        if self.mode == "pure-rl":
            self._pure_rl()
        else:
            self._iterate()
        self._final_evaluation()
        self.state.finished = True
        self._save()

    def _register_known_skills(self) -> None:
        """The env server may be new (a resumed run, a restarted server): register what earlier work produced."""
        known = {s.name: s.code for s in self.library.all() if s.success_rate > 0}
        known.update({name: sub.skill_code for name, sub in self.state.subtasks.items()
                      if sub.status == "done" and sub.decision == "code" and sub.skill_code})
        for name, code in known.items():
            try:
                self.stubs.env.RegisterSkill(env_pb2.RegisterSkillRequest(name=name, code=code, replace=True,
                                                                          description="restored"))
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                log.warning("skill %s could not be restored: %s", name, exc.details())

    def _task_subtask(self) -> planner_pb2.SubTask:
        task = self.run.request.task
        success = list(task.success) or [common_pb2.Condition(achievement=task.name)]
        decision = planner_pb2.DECISION_RL if self.mode == "pure-rl" else planner_pb2.DECISION_CODE
        return planner_pb2.SubTask(name=task.name or "task", description=task.description or task.name,
                                   success=success, decision=decision)

    def _pure_rl(self) -> None:
        """The baseline: one training on the whole task, primitives only, default dense reward, no LLM."""
        plan = planner_pb2.Plan(subtasks=[self._task_subtask()], iteration=0, rationale="pure RL baseline")
        self._adopt_plan(plan)
        st = plan.subtasks[0]
        state = self.state.subtasks[st.name]
        if state.status == "done" or state.job_id:
            return
        frames = self.total_frames or self.frames_per_training
        config = learner_pb2.RLConfig(
            name=st.name, task=common_pb2.TaskSpec(name=st.name, success=list(st.success)), env_frames=frames,
            episode_length=self.final_frames, seed=self.run.request.seed,
            reward_terms=[common_pb2.RewardTerm(kind="success", weight=10.0),
                          common_pb2.RewardTerm(kind="achievement", target="*", weight=1.0)])
        self._train(st, state, config)

    def _adopt_plan(self, plan: planner_pb2.Plan) -> None:
        if self.mode == "pure-code":
            for st in plan.subtasks:
                st.decision = planner_pb2.DECISION_CODE
        self.state.set_plan(plan)
        self.run.plan = plan
        self.run.emit(plan=plan)
        self._save()

    def _iterate(self) -> None:
        while self.state.outer_iteration < self.outer:
            self._check_stop()
            self.run.iteration = self.state.outer_iteration
            started, tokens_before = time.time(), self.run.tokens
            frames_before = self.state.frames_used
            plan = self.state.plan_proto()
            if plan is None or self.state.slow_feedback:
                plan = self._new_plan(plan)
                self._adopt_plan(plan)
            for st in plan.subtasks:
                self._check_stop()
                self._solve(st, plan)
            self.state.iterations.append({"iteration": self.state.outer_iteration,
                                          "tokens": self.run.tokens - tokens_before,
                                          "seconds": time.time() - started,
                                          "frames": self.state.frames_used - frames_before})
            self.run.emit(iteration_end=planner_pb2.IterationEnd(tokens=self.run.tokens - tokens_before,
                                                                 seconds=time.time() - started))
            self.state.outer_iteration += 1
            metrics.PLANNER_ITERATIONS.inc()
            pending = [s for s in plan.subtasks if self.state.subtasks[s.name].status != "done"]
            self.state.slow_feedback = "" if not pending else self._summary(plan)
            self._save()
            if not pending or (self._frames_left() == 0):
                return

    def _new_plan(self, previous: planner_pb2.Plan | None) -> planner_pb2.Plan:
        if self.agents == "one" or self.slow is None:
            plan = planner_pb2.Plan(subtasks=[self._task_subtask()], iteration=self.state.outer_iteration,
                                    rationale="single agent: the whole task is one sub-task")
            if previous is not None and self.state.subtasks[plan.subtasks[0].name].decision == "rl":
                plan.subtasks[0].decision = planner_pb2.DECISION_RL
            return plan
        try:
            plan, record = self.slow.plan(self.run.request.task, iteration=self.state.outer_iteration,
                                          previous=previous, feedback=self.state.slow_feedback)
        except StructuredOutputError as exc:
            # No usable plan: fall back to the whole task as one sub-task rather than ending the run.
            log.warning("slow agent: %s; using the whole task as one sub-task", exc)
            if exc.record is not None:
                self.run.llm_call(exc.record)  # a replay must meet this call too
            why = shorten(str(exc), 300)
            plan = planner_pb2.Plan(subtasks=[self._task_subtask()], iteration=self.state.outer_iteration,
                                    rationale=f"fallback, the slow agent's answer was unusable: {why}")
            return plan
        self.run.llm_call(record)
        return self._ending_in_goal(plan)

    def _ending_in_goal(self, plan: planner_pb2.Plan) -> planner_pb2.Plan:
        """A plan whose last sub-task does not reach the task's own success condition cannot solve the task
        (weak models plan side quests): the task itself is appended as the last link of the chain, learned with
        RL over the earlier sub-tasks' skills where a learner exists, coded otherwise."""
        goal = self._task_subtask()
        wanted = {c.SerializeToString(deterministic=True) for c in goal.success}
        if plan.subtasks and wanted <= {c.SerializeToString(deterministic=True) for c in plan.subtasks[-1].success}:
            return plan
        taken = {st.name for st in plan.subtasks}
        while goal.name in taken:
            goal.name += "_goal"
        if self.mode != "pure-code" and self.stubs.learner is not None:
            goal.decision = planner_pb2.DECISION_RL
        plan.subtasks.append(goal)
        plan.rationale = (plan.rationale + " | the task itself was appended as the last sub-task: the plan did "
                          "not end in the task's success condition").strip(" |")
        return plan

    def _summary(self, plan: planner_pb2.Plan) -> str:
        lines = []
        for st in plan.subtasks:
            s = self.state.subtasks[st.name]
            feedback = shorten(s.feedback, SUMMARY_FEEDBACK_CHARS)  # whole sentences, never cut mid-word
            lines.append(f"- {st.name} ({s.decision}): {s.status}, success {s.success_rate:.0%}"
                         f"{'; ' + feedback if feedback else ''}")
        return "\n".join(lines)

    def _start_inventory(self, plan: planner_pb2.Plan, subtask: planner_pb2.SubTask) -> list[common_pb2.ItemCount]:
        given: dict[str, int] = {}
        for earlier in plan.subtasks:
            if earlier.name == subtask.name:
                break
            for item, count in implied_items(list(earlier.success), self.describe.rules, self.items).items():
                given[item] = max(given.get(item, 0), count)
        return [common_pb2.ItemCount(item=k, count=v) for k, v in sorted(given.items())]

    # --- inner loop ---------------------------------------------------------------------------------
    def _solve(self, st: planner_pb2.SubTask, plan: planner_pb2.Plan) -> None:
        state = self.state.subtasks[st.name]
        if state.status == "done":
            return
        start = self._start_inventory(plan, st)
        while state.inner_iterations < self.inner:
            self._check_stop()
            if self._frames_left() == 0:
                state.feedback = "the run's frame budget is spent"
                return
            verdict = self._attempt_code(st, state, start) if state.decision == "code" else \
                self._attempt_rl(st, state, start, plan)
            state.inner_iterations += 1  # counted once the attempt ran: a paused attempt is redone on resume
            if verdict is None:
                continue
            state.success_rate = verdict.success_rate
            state.feedback = f"{verdict.diagnosis} {verdict.suggestion}".strip()
            self.run.emit(st.name, verdict=verdict)
            self._save()
            if verdict.success or verdict.target == critic_pb2.TARGET_KEEP:
                state.status = "done"  # a passed sub-task is kept
                self._save()
                return
            if verdict.target == critic_pb2.TARGET_SLOW:
                break
        state.status = "failed"
        if state.decision == "code" and state.code_failures >= self.inner and self.mode == "rl-gpt" \
                and self.stubs.learner is not None:
            # Code that keeps failing moves to RL (with the skills that work as macro actions).
            state.decision = "rl"
            state.feedback += " (coding failed repeatedly: moved to RL)"
        state.inner_iterations = 0
        self._save()

    def _attempt_code(self, st: planner_pb2.SubTask, state: SubTaskState,
                      start: list[common_pb2.ItemCount]) -> critic_pb2.Verdict | None:
        assert self.fast is not None
        previous_error = state.tests[-1].get("error", "") if state.tests else ""
        candidates = self.fast.write_skill(st, iteration=self.state.outer_iteration, candidates=self.candidates,
                                           previous_code=state.skill_code, error=previous_error,
                                           feedback=state.feedback, start_inventory=start)
        for c in candidates:
            if c.record is not None:
                self.run.llm_call(c.record, st.name)
            self._spend(state, sum(e.steps for e in c.episodes))
            self.run.emit(st.name, code=planner_pb2.CodeEvent(
                skill=st.name, code=c.answer.code if c.answer else "", candidate=c.index,
                success_rate=c.success_rate, error=c.error))
        best = candidates[0]
        error_text = f"{best.error.type} line {best.error.line}: {best.error.message}" if best.error else ""
        state.tests.append({"iteration": self.state.outer_iteration, "kind": "code", "frames": state.frames,
                            "success_rate": max(0.0, best.success_rate), "error": error_text})
        self._attempt_file(f"{st.name}_code{state.inner_iterations}", {
            "candidates": [{"index": c.index, "code": c.answer.code if c.answer else None,
                            "success_rate": c.success_rate, "error": str(c.error) if c.error else ""}
                           for c in candidates]})
        if best.answer is not None:
            state.skill_code = best.answer.code
        if best.success_rate <= 0:
            state.code_failures += 1
        return self._judge(st, "code", list(best.episodes), code=state.skill_code,
                           errors=[best.error] if best.error else [], start=start)

    def _attempt_rl(self, st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount],
                    plan: planner_pb2.Plan) -> critic_pb2.Verdict | None:
        if self.stubs.learner is None:
            state.feedback = "no learner is configured: RL sub-tasks cannot be trained"
            return critic_pb2.Verdict(success=False, diagnosis=state.feedback, target=critic_pb2.TARGET_SLOW)
        assert self.fast is not None
        later = [s.name for s in plan.subtasks][[s.name for s in plan.subtasks].index(st.name) + 1:]
        frames = training_frames(self.frames_per_training, self._frames_left(), sum(
            1 for name in later if self.state.subtasks[name].decision == "rl"
            and self.state.subtasks[name].status != "done"))
        previous = json_format.ParseDict(state.rl_config, learner_pb2.RLConfig()) if state.rl_config else None
        try:
            config, record = self.fast.write_rl_config(st, env_frames=frames, iteration=self.state.outer_iteration,
                                                       previous=previous, feedback=state.feedback,
                                                       start_inventory=start)
        except StructuredOutputError as exc:
            # An unusable answer is a failed attempt with feedback, not the end of the run.
            state.feedback = str(exc)
            if exc.record is not None:
                self.run.llm_call(exc.record, st.name)
            state.tests.append({"iteration": self.state.outer_iteration, "kind": "rl", "error": str(exc)[:500],
                                "success_rate": 0.0, "frames": state.frames})
            return None
        self.run.llm_call(record, st.name)
        # Skills of the earlier sub-tasks that work join the action space (RL-GPT's key mechanism).
        working = [s.name for s in self.library.all() if s.success_rate > 0]
        # The library skills the plan suggested for this sub-task join too (the slow agent was told they would).
        config.skills.extend(name for name in st.skills if name in working and name not in config.skills)
        for name in (s.name for s in plan.subtasks):
            if name == st.name:
                break
            if self.state.subtasks.get(name) and self.state.subtasks[name].status == "done" \
                    and self.state.subtasks[name].decision == "code" and name in working \
                    and name not in config.skills:
                config.skills.append(name)
        if config.skills and config.skill_max_steps <= 1:
            config.skill_max_steps = 0  # one frame per skill is no macro action: K is the learner's default
        del config.task.start_inventory[:]
        config.task.start_inventory.extend(start)
        state.rl_config = json_format.MessageToDict(config, preserving_proto_field_name=True)
        return self._train(st, state, config, start)

    def _train(self, st: planner_pb2.SubTask, state: SubTaskState, config: learner_pb2.RLConfig,
               start: list[common_pb2.ItemCount] | None = None) -> critic_pb2.Verdict | None:
        assert self.stubs.learner is not None
        self.run.emit(st.name, config=config)
        try:
            job_id = self.stubs.learner.StartTraining(learner_pb2.StartTrainingRequest(config=config)).job_id
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                state.feedback = f"the learner refused the config: {exc.details()}"
                state.tests.append({"iteration": self.state.outer_iteration, "kind": "rl", "error": state.feedback,
                                    "success_rate": 0.0, "frames": state.frames})
                return None
            raise
        state.job_id = job_id
        self._save()
        curve: list[dict[str, float]] = []
        final = None
        for progress in self.stubs.learner.WatchJob(learner_pb2.WatchJobRequest(job_id=job_id), timeout=24 * 3600):
            if self.run.stop_requested.is_set():
                self.stubs.learner.StopJob(learner_pb2.StopJobRequest(job_id=job_id))
                raise StopRequested()
            curve.append({"env_frames": progress.env_frames, "success_rate": progress.success_rate,
                          "mean_return": progress.mean_return})
            self.run.emit(st.name, training=progress)
            final = progress
        # Every training of the sub-task stays on its curve, on the frames the sub-task had spent by then.
        state.curve.extend({**point, "env_frames": state.frames + point["env_frames"], "job_id": job_id,
                            "iteration": self.state.outer_iteration} for point in curve)
        self._spend(state, final.env_frames if final else 0)
        if final is None or final.state != learner_pb2.JOB_STATE_SUCCEEDED:
            message = final.message if final else "no progress"
            state.tests.append({"iteration": self.state.outer_iteration, "kind": "rl", "error": message,
                                "success_rate": 0.0, "frames": state.frames, "job_id": job_id})
            raise FailedPrecondition(f"training of {st.name} (job {job_id}) did not finish: {message}; resume with "
                                     "--resume once the failed service is back")
        evaluation = self.stubs.learner.Evaluate(learner_pb2.EvaluateRequest(
            job_id=job_id, episodes=self.eval_episodes, seed=self.run.request.seed), timeout=3600)
        state.tests.append({"iteration": self.state.outer_iteration, "kind": "rl", "job_id": job_id,
                            "success_rate": evaluation.success_rate, "frames": state.frames, "error": ""})
        self._attempt_file(f"{st.name}_rl{state.inner_iterations}", {
            "job_id": job_id, "curve": curve, "evaluation_success_rate": evaluation.success_rate})
        points = [critic_pb2.CurvePoint(env_frames=int(p["env_frames"]), success_rate=p["success_rate"],
                                        mean_return=p["mean_return"]) for p in curve]
        return self._judge(st, "rl", list(evaluation.episodes), curve=_increasing(points), start=start,
                           env_frames=config.env_frames)

    def _judge(self, st: planner_pb2.SubTask, decision: str, rollouts: list[common_pb2.EpisodeSummary], *,
               code: str = "", errors: list[common_pb2.SkillError] | None = None,
               curve: list[critic_pb2.CurvePoint] | None = None, start: list[common_pb2.ItemCount] | None = None,
               env_frames: int | None = None) -> critic_pb2.Verdict:
        rate = sum(e.success for e in rollouts) / len(rollouts) if rollouts else 0.0
        if self.stubs.critic is None or self.agents != "slow-fast-critic":
            # Without a critic the agents only see the measured rate and the first error.
            error = errors[0] if errors else None
            return critic_pb2.Verdict(
                success=rate >= 0.5, success_rate=rate,
                target=critic_pb2.TARGET_KEEP if rate >= 0.5 else critic_pb2.TARGET_FAST,
                diagnosis=f"success rate {rate:.0%}" + (f"; error {error.type}: {error.message}" if error else ""))
        response = self.stubs.critic.Judge(critic_pb2.JudgeRequest(
            subtask=st.name, description=st.description, success=list(st.success), rollouts=rollouts[:64],
            code=code[:60000], errors=(errors or [])[:64], curve=(curve or [])[-2000:], decision=decision,
            rules=self.describe.rules, start_inventory=start or [],
            test_protocol=self.protocol.judge_text(decision, list(start or []), env_frames)), timeout=600)
        if response.llm_record:
            try:
                self.run.llm_call(record_from_json(response.llm_record), st.name)
            except ValueError as exc:  # a critic of another version: the verdict still counts
                log.warning("critic's LLM record of %s is unreadable: %s", st.name, exc)
        return response.verdict

    # --- task-level controller ----------------------------------------------------------------------
    def _final_evaluation(self) -> None:
        if self.state.final is not None:
            return
        self._check_stop()
        plan = self.state.plan_proto()
        task = self.run.request.task
        whole = common_pb2.TaskSpec(name=task.name, description=task.description, success=list(task.success))
        rl_jobs = [(st.name, self.state.subtasks[st.name].job_id) for st in (plan.subtasks if plan else [])
                   if self.state.subtasks[st.name].decision == "rl" and self.state.subtasks[st.name].job_id]
        codes = [(st.name, self.state.subtasks[st.name].skill_code) for st in (plan.subtasks if plan else [])
                 if self.state.subtasks[st.name].decision == "code" and self.state.subtasks[st.name].skill_code]
        final: dict[str, Any] = {"episodes": self.eval_episodes, "frames_used": self.state.frames_used}
        if rl_jobs and self.stubs.learner is not None:
            name, job_id = rl_jobs[-1]
            result = self.stubs.learner.Evaluate(learner_pb2.EvaluateRequest(
                job_id=job_id, episodes=self.eval_episodes, seed=self.run.request.seed + 1000, task=whole),
                timeout=3600)
            final.update(controller=f"policy of {name} (job {job_id}) on the whole task",
                         success_rate=result.success_rate, returns=list(result.returns))
        elif codes and (plan is None or len(codes) == len(plan.subtasks)):
            source = chain_skill(codes)
            try:
                self.stubs.env.RegisterSkill(env_pb2.RegisterSkillRequest(
                    name=f"chain_{self.run.id[-6:]}", code=source, replace=True,
                    description="the run's coded sub-task skills in plan order"))
                result = self.stubs.env.RunSkill(env_pb2.RunSkillRequest(
                    skill=f"chain_{self.run.id[-6:]}", episodes=min(self.eval_episodes, 64), seed=self.run.request.seed
                    + 1000, max_steps=self.final_frames, task=whole))
                final.update(controller="chain of coded skills", success_rate=result.success_rate,
                             returns=[e.episode_return for e in result.episodes])
            except grpc.RpcError as exc:
                final.update(controller="chain of coded skills", success_rate=0.0,
                             error=f"{exc.code().name}: {exc.details()}")
            (self.run.dir / "chain_skill.py").write_text(source)
        else:
            final.update(controller="none: no sub-policy finished", success_rate=0.0)
        self.state.final = final
        self.run.success_rate = float(final["success_rate"])
        self._save()


def training_frames(per_training: int, left: int | None, later_rl_subtasks: int) -> int:
    """Frames for one training: the per-training budget, but never more than this sub-task's share of what is
    left, so that the RL sub-tasks after it (the task's own goal is the last) still get trained when a weak plan
    starts with a side quest that never succeeds."""
    if left is None:
        return per_training
    return min(per_training, left // (1 + later_rl_subtasks))


def _increasing(points: list[critic_pb2.CurvePoint]) -> list[critic_pb2.CurvePoint]:
    """Curve points with strictly increasing frames (the critic refuses repeats)."""
    out: list[critic_pb2.CurvePoint] = []
    for p in points:
        if not out or p.env_frames > out[-1].env_frames:
            out.append(p)
    return out


def describe_failure(exc: BaseException) -> tuple[str, bool]:
    """Message and resumability of an error that ended a run."""
    if isinstance(exc, StopRequested):
        return "stopped on request; resume with --resume", True
    if isinstance(exc, RlgptError):
        return str(exc), True
    if isinstance(exc, grpc.RpcError):
        return f"a service failed: {exc.code().name}: {exc.details()}; resume with --resume once it is back", True
    return f"{type(exc).__name__}: {exc}", False
