"""RL around a kept plan, the planner's side: the fast agent's answer (its prompt: agents/test_kept_plan_agent.py)
applied to the training (macro actions registered on a real env server), and the training done after the last
iteration, also when a resumed run finds the iterations done but the training not (test doubles of the LLM and the
learner; the whole method runs against real services in tests/integration/test_rlgpt_method.py)."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from fakes.refusal import Refused
from kept_plan_support import FAILED, PICKAXE, PLAN, WALK, ScriptedLLM

from rlgpt import worlds
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner.agents.fast import FastAgent
from services.planner.context import Stubs
from services.planner.kept_plan import (
    KEPT_PLAN_PRIOR,
    OWN_REWARD,
    final_controller,
    kept_plan_name,
)
from services.planner.loops import TwoLoops
from services.planner.report import kept_plan_section
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import Decision, IterationRecord, RunState, Status


class PlanLearner:
    """A test double of the learner for one kept-plan job: trains at once; the policy and the plan alone score
    ``policy`` and ``alone``, and ``briefing`` (policy, plan alone) on the revision's worlds."""

    def __init__(self, policy: float | list[float], alone: float,
                 briefing: tuple[float, float] = (0.375, 0.625)) -> None:
        self.policy, self.alone = policy, alone  # a list: job i's policy scores policy[i - 1]
        self.briefing = briefing
        self.configs: list[learner_pb2.RLConfig] = []
        self.evaluations: list[learner_pb2.EvaluateRequest] = []

    def StartTraining(self, request: learner_pb2.StartTrainingRequest) -> learner_pb2.StartTrainingResponse:
        self.configs.append(request.config)
        return learner_pb2.StartTrainingResponse(job_id=f"job-{len(self.configs)}")

    def WatchJob(self, request: learner_pb2.WatchJobRequest, timeout: float):
        macros = [f"skill:{name}" for name in self.configs[-1].skills]  # the policy chose the plan, then these
        shares = {"plan": 0.9, **{name: 0.1 / len(macros) for name in macros}} if macros else {"plan": 1.0}
        yield learner_pb2.JobProgress(job_id=request.job_id, env_frames=self.configs[-1].env_frames,
                                      state=learner_pb2.JOB_STATE_SUCCEEDED, action_shares=shares)

    def Evaluate(self, request: learner_pb2.EvaluateRequest, timeout: float) -> learner_pb2.EvaluateResponse:
        self.evaluations.append(request)
        if request.seed == worlds.revision_worlds(0):
            return learner_pb2.EvaluateResponse(success_rate=self.briefing[request.plan_alone])
        policy = self.policy[int(request.job_id.split("-")[1]) - 1] if isinstance(self.policy, list) else self.policy
        return learner_pb2.EvaluateResponse(success_rate=self.alone if request.plan_alone else policy)


def finished_iterations(tmp_path: Path, env_server, llm: ScriptedLLM | None, learner: PlanLearner,
                        agents: str = "", revisions: int = 0) -> TwoLoops:
    """TwoLoops whose iterations are all done (as a resumed run finds them): every sub-task coded and done, the
    chain at 25% after the last one; ``revisions``: of the fast agent's config (none unless asked)."""
    task = common_pb2.TaskSpec(name="make_wood_pickaxe", success=[PICKAXE])
    run = Run(tmp_path / "run", planner_pb2.StartRunRequest(task=task, agents=agents))
    describe = env_server.stub.Describe(env_pb2.DescribeRequest())
    state = RunState(outer_iteration=2, iterations=[
        IterationRecord(iteration=1, tokens=0, seconds=0, frames=0, success_rate=0.25, failed=FAILED).as_json()])
    state.set_plan(PLAN)
    for sub in state.subtasks.values():
        sub.status, sub.skill_code = Status.DONE, WALK
    two = TwoLoops(run, state, describe, llm, SkillLibrary(tmp_path / "library.json"),
                   Stubs(env=env_server.stub, learner=learner, critic=None),
                   PlannerSettings(max_outer_iterations=2, total_env_frames=50_000, kept_plan_revisions=revisions,
                                   eval_episodes=8))
    two.attempts.fast = FastAgent(llm, env_server.stub, describe, two.ctx.library) if llm is not None else None
    return two


def kinds(config: learner_pb2.RLConfig) -> dict[str, float]:
    return {t.kind: round(t.weight, 4) for t in config.reward_terms}


def test_a_resumed_run_with_its_iterations_done_trains_around_the_plan_with_the_fast_agents_config(
        tmp_path: Path, env_server) -> None:
    answer = {"primitive_actions": ["noop", "do", "move_left"], "skill_max_steps": 12,
              "macro_actions": [{"name": "step_aside", "description": "walks left", "code": WALK},
                                {"name": "broken", "description": "never yields", "code": "def skill(agent):\n"
                                                                                          "    return\n"}],
              "reward_terms": [{"kind": "death", "target": "", "weight": -3}, {"kind": "health", "weight": 0.5}],
              "hand_back_when_hurt": True, "hand_back_within": 3}
    llm, learner = ScriptedLLM(answer), PlanLearner(policy=0.5, alone=0.25)
    two = finished_iterations(tmp_path, env_server, llm, learner)
    two._iterate()  # no iteration left to run: the training around the plan is what remains
    config = learner.configs[0]
    assert [step.skill.split("__kept")[0] for step in config.plan] == ["wood", "table", "pickaxe"]
    assert list(config.primitive_actions) == ["noop", "do", "move_left"] and config.skill_max_steps == 12
    assert config.plan_interrupt == common_pb2.PlanInterrupt(damage=True, threat_within=3)
    assert config.plan_prior == pytest.approx(KEPT_PLAN_PRIOR)  # the policy starts on the plan
    name = kept_plan_name("make_wood_pickaxe")
    assert list(config.skills) == [f"{name}__step_aside"]  # the one that never yields was refused
    assert kinds(config) == {**{k: w for k, w, _ in OWN_REWARD}, "death": -3.0, "health": 0.5}
    assert "ended before wood was done: 1 died (zombie: 1)" in llm.prompts[0]
    kept = two.state.kept_plan
    assert kept["config_by"] == "fast agent" and kept["refused_macro_actions"][0]["name"] == f"{name}__broken"
    assert (kept["success_rate"], kept["plan_alone_success_rate"]) == (0.5, 0.25)
    # Both on the same worlds: the same seed and episodes, the second the plan alone.
    policy, alone = learner.evaluations
    assert (policy.seed, policy.episodes) == (alone.seed, alone.episodes)
    assert (policy.plan_alone, alone.plan_alone) == (False, True)
    assert final_controller(two.ctx) == kept["job_id"]
    assert two.state.subtasks[name].macro_actions == {f"{name}__step_aside": WALK}  # restored on a resume
    two._iterate()
    assert len(learner.configs) == 1  # done once


def test_a_policy_that_loses_to_the_plan_alone_is_revised_with_its_answer_and_outcome(tmp_path: Path,
                                                                                       env_server) -> None:
    answer = {"primitive_actions": ["noop"], "skill_max_steps": 12, "reward_terms": [],
              "macro_actions": [{"name": "step_aside", "description": "walks left", "code": WALK},
                                {"name": "broken", "description": "never yields",
                                 "code": "def skill(agent):\n    return\n"}],
              "hand_back_when_hurt": True, "hand_back_within": 2}
    llm, learner = ScriptedLLM(answer), PlanLearner(policy=[0.125, 0.5], alone=0.25)
    two = finished_iterations(tmp_path, env_server, llm, learner, revisions=2)
    two._iterate()
    assert len(learner.configs) == 2 and len(llm.prompts) == 2  # the revision won: no second one
    # The frames left are shared: a third of them first (two revisions may follow), half the rest next.
    assert [c.env_frames for c in learner.configs] == [50_000 // 3, (50_000 - 50_000 // 3) // 2]
    first, revised = llm.prompts
    assert "This is a revision" not in first and "This is a revision" in revised
    assert json.dumps(WALK) in revised and '"hand_back_within": 2' in revised  # its whole answer, code included
    # Scores on worlds of the revision's own: the judged ones (the policy's 12%, the plan's 25%) are not told.
    judged, briefing = learner.evaluations[0], learner.evaluations[2]
    assert judged.seed == worlds.held_out_worlds(0)  # the run's seed is 0
    assert briefing.seed == worlds.revision_worlds(0) and briefing.episodes == judged.episodes
    assert [e.seed for e in learner.evaluations[4:]] == [judged.seed] * 2  # the revised policy judged as the first
    assert f"On {judged.episodes} other new worlds (whole episodes, the task's success): the policy 38%, the plan " \
           "alone 62%." in revised and "12%" not in revised and "alone 25%" not in revised
    assert "Your macro action broken was refused by its test run and left out of that training: " in revised
    assert ("What the policy chose in its last training episodes (share of its decisions; the plan or a macro action "
            "is one decision however many frames it plays): the plan 90%, step_aside 10%.") in revised
    assert "Learning curve of that training" in revised and "frames: success 0%" in revised
    kept = two.state.kept_plan
    assert kept["revision"] == 1 and [e["job_id"] for e in kept["earlier"]] == ["job-1"]
    assert kept["earlier"][0]["answer"]["macro_actions"][0]["code"] == WALK
    assert final_controller(two.ctx) == "job-2"
    report = "\n".join(kept_plan_section(kept))
    assert "Training 1 (job job-1): the policy 12%, the plan alone 25% on the same worlds; the fast agent revised " \
           f"its config, told its answer, the learning curve and, on {judged.episodes} other worlds, the policy 38% " \
           "and the plan alone 62%." in report
    assert "Training 2, the last revision:\nWhat the policy chose in its last training episodes (share of its " \
           "decisions; the plan or a macro action is one decision however many frames it plays): the plan 90%, " \
           "step_aside 10%.\nJob job-2: the policy scored 50% and the plan alone 25% on the same " \
           "worlds: the policy is the final controller." in report
    two._iterate()
    assert len(learner.configs) == 2  # a resume trains nothing more


class BriefingRefused(PlanLearner):
    """A learner that refuses to score the revision's worlds."""

    def Evaluate(self, request: learner_pb2.EvaluateRequest, timeout: float) -> learner_pb2.EvaluateResponse:
        if request.seed == worlds.revision_worlds(0):
            raise Refused(grpc.StatusCode.FAILED_PRECONDITION, "the job's checkpoint is gone")
        return super().Evaluate(request, timeout)


def test_a_briefing_the_learner_refuses_is_recorded_and_the_chain_stays(tmp_path: Path, env_server) -> None:
    answer = {"primitive_actions": ["noop"], "skill_max_steps": 12, "reward_terms": [], "macro_actions": []}
    learner = BriefingRefused(policy=0.125, alone=0.25)
    two = finished_iterations(tmp_path, env_server, ScriptedLLM(answer), learner, revisions=1)
    two._iterate()
    assert len(learner.configs) == 1 and final_controller(two.ctx) is None
    assert two.state.kept_plan["briefing"]["error"] == "FAILED_PRECONDITION: the job's checkpoint is gone"
    assert "Its revision's briefing could not be scored: FAILED_PRECONDITION: the job's checkpoint is gone" in \
        "\n".join(kept_plan_section(two.state.kept_plan))
    two._iterate()
    assert len(learner.configs) == 1  # recorded: a resume does not ask again


def test_revisions_stop_at_the_setting(tmp_path: Path, env_server) -> None:
    answer = {"primitive_actions": ["noop"], "skill_max_steps": 12, "reward_terms": [], "macro_actions": []}
    for revisions in (0, 1):
        learner = PlanLearner(policy=0.125, alone=0.25)
        two = finished_iterations(tmp_path / str(revisions), env_server, ScriptedLLM(answer), learner,
                                  revisions=revisions)
        two._iterate()
        assert len(learner.configs) == 1 + revisions and final_controller(two.ctx) is None
        assert sum(c.env_frames for c in learner.configs) == (50_000 if revisions == 0 else 50_000 // 2 * 2)


def test_a_chain_with_an_rl_link_keeps_its_plan_with_the_links_policy_pinned(tmp_path: Path, env_server) -> None:
    answer = {"primitive_actions": ["noop"], "skill_max_steps": 12, "reward_terms": [], "macro_actions": []}
    llm, learner = ScriptedLLM(answer), PlanLearner(policy=0.5, alone=0.25)
    two = finished_iterations(tmp_path, env_server, llm, learner)
    table = two.state.subtasks["table"]
    table.decision, table.job_id, table.skill_code = Decision.RL, "rl-latest", ""
    table.tests = [{"iteration": 0, "kind": "rl", "success_rate": 0.75, "job_id": "rl-best"},
                   {"iteration": 1, "kind": "rl", "success_rate": 0.5, "job_id": "rl-latest"}]
    two._iterate()
    wood, by_policy, pickaxe = learner.configs[0].plan
    assert by_policy.job_id == "rl-best" and not by_policy.skill  # the policy the chain's link runs
    assert list(by_policy.success) == list(PLAN.subtasks[1].success)
    assert wood.skill.startswith("wood__kept") and pickaxe.skill.startswith("pickaxe__kept") and not wood.job_id
    assert "2. table: place a table (done when: achievement place_table; done by its policy trained by RL)" in \
        llm.prompts[0] and "1. wood: get wood (done when: at least 5 wood)\n" in llm.prompts[0]
    assert final_controller(two.ctx) == two.state.kept_plan["job_id"]


def test_a_chain_whose_last_coded_link_stayed_below_its_bar_keeps_its_plan(tmp_path: Path, env_server) -> None:
    """Issue 35: kept plans apply to any chain with a controller per link. A capable model's collect_diamond run
    ended its iterations with the diamond link at 50% (failed, its latest code in the chain) and kept no plan."""
    answer = {"primitive_actions": ["noop"], "skill_max_steps": 12, "reward_terms": [], "macro_actions": []}
    llm, learner = ScriptedLLM(answer), PlanLearner(policy=0.5, alone=0.25)
    two = finished_iterations(tmp_path, env_server, llm, learner)
    two.state.subtasks["pickaxe"].status = Status.FAILED  # below its bar; its code still plays its link
    two._iterate()
    assert len(learner.configs) == 1 and learner.configs[0].plan[-1].skill.startswith("pickaxe__kept")
    assert final_controller(two.ctx) == two.state.kept_plan["job_id"]


def test_a_chain_whose_rl_link_has_no_training_keeps_no_plan(tmp_path: Path, env_server) -> None:
    learner = PlanLearner(policy=0.5, alone=0.25)
    two = finished_iterations(tmp_path, env_server, ScriptedLLM(None), learner)
    table = two.state.subtasks["table"]
    table.decision, table.skill_code = Decision.RL, ""
    two._iterate()
    assert learner.configs == [] and two.state.kept_plan is None


def test_an_unusable_answer_trains_the_planners_defaults_and_a_worse_policy_keeps_the_chain(
        tmp_path: Path, env_server) -> None:
    learner = PlanLearner(policy=0.25, alone=0.25)
    two = finished_iterations(tmp_path, env_server, ScriptedLLM(None), learner)
    two._iterate()
    config = learner.configs[0]
    assert list(config.primitive_actions) == [] and config.skill_max_steps == 16 and not config.skills
    assert not config.HasField("plan_interrupt") and config.plan_prior == pytest.approx(KEPT_PLAN_PRIOR)
    assert kinds(config) == {"stage": 1.0, "success": 10.0, "death": -1.0, "health": 0.1}
    kept = two.state.kept_plan
    assert kept["config_by"] == "planner defaults" and "no JSON object" in kept["config_error"]
    assert final_controller(two.ctx) is None  # not better than the plan alone on the same worlds


def test_the_one_agent_setup_trains_the_planners_defaults(tmp_path: Path, env_server) -> None:
    learner = PlanLearner(policy=0.5, alone=0.25)
    llm = ScriptedLLM({"primitive_actions": ["noop"], "skill_max_steps": 3, "macro_actions": [], "reward_terms": []})
    two = finished_iterations(tmp_path, env_server, llm, learner, agents="one")
    two.attempts.fast = FastAgent(llm, env_server.stub, two.ctx.describe, two.ctx.library)
    two._iterate()
    assert llm.prompts == [] and two.state.kept_plan["config_by"] == "planner defaults"


def test_a_state_without_the_plan_alone_compares_with_the_chain(tmp_path: Path, env_server) -> None:
    two = finished_iterations(tmp_path, env_server, None, PlanLearner(0, 0))
    two.state.kept_plan = {"chain_success_rate": 0.25, "job_id": "job-1", "success_rate": 0.5}
    assert final_controller(two.ctx) == "job-1"


def test_the_kept_plans_policy_is_evaluated_on_the_runs_final_worlds(tmp_path: Path, env_server) -> None:
    learner = PlanLearner(policy=0.5, alone=0.25)
    two = finished_iterations(tmp_path, env_server, None, learner)
    two.state.kept_plan = {"job_id": "job-1", "success_rate": 0.5, "plan_alone_success_rate": 0.25}
    two.execute()
    final = learner.evaluations[-1]  # the worlds every controller's final evaluation plays (rlgpt/worlds.py)
    assert final.job_id == "job-1" and final.seed == worlds.final_worlds(0) and two.state.final["success_rate"] == 0.5
