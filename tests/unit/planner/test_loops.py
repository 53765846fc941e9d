"""The loops' pieces: plan rules, attempts' helpers, the controller's chain, the modes and the state's records;
the RL sub-tasks of an iteration training together in rounds, against test doubles of the fast agent, learner and
critic (the whole loops run against real services in tests/integration)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rlgpt.errors import FailedPrecondition
from rlgpt.llm.client import CallRecord
from rlgpt.prompts import shorten
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, learner_pb2, planner_pb2
from services.planner.agents.answers import MacroActions, RLAnswer
from services.planner.agents.one import OneAgent
from services.planner.agents.one_answers import WrittenAnswers
from services.planner.attempts import Attempts, training_frames
from services.planner.context import AgentSetup, Mode, StopRequested, Stubs
from services.planner.controller import chain_links, coded_skills, rl_jobs
from services.planner.judging import increasing, measured_verdict
from services.planner.loops import TwoLoops
from services.planner.plans import ending_in_goal, summary, task_subtask
from services.planner.runs import Run
from services.planner.settings import PlannerSettings
from services.planner.skill_library import SkillLibrary
from services.planner.state import Decision, FinalResult, RunState, Status, SubTaskState, TestRecord

WOOD = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=2))
TABLE = common_pb2.Condition(achievement="place_table")


def test_training_frames_are_an_equal_share_of_what_is_left_among_the_rounds_trainings() -> None:
    assert training_frames(15000, None, 3) == 15000  # no run budget: the per-training budget
    assert training_frames(15000, 60000) == 15000
    assert training_frames(15000, 30000, 2) == 15000  # half of what is left
    assert training_frames(15000, 20000, 2) == 10000
    assert training_frames(15000, 30000, 3) == 10000
    assert training_frames(15000, 9000) == 9000  # alone, a training takes what is left
    assert training_frames(15000, 9000, 0) == 9000
    for left in range(0, 1000, 7):
        for sharing in range(1, 6):
            assert sharing * training_frames(15000, left, sharing) <= left  # together never more than is left


def test_shorten_keeps_whole_sentences() -> None:
    feedback = ("The skill never found a tree in 3 of 4 episodes. It walked into water and turned back, again and "
                "again, for 200 frames. Explore when no tree is seen.")
    cut = shorten(feedback, 90)
    assert cut == "The skill never found a tree in 3 of 4 episodes. ..."
    assert shorten(feedback, 1000) == feedback
    words = shorten("a" * 10 + " " + "b" * 100, 40)
    assert words == "a" * 10 + " ..."
    assert len(shorten("x" * 100, 20)) <= 20


def test_the_slow_agents_summary_never_cuts_feedback_mid_sentence() -> None:
    feedback = "First sentence is here. " * 30 + "Last one."
    state = RunState(subtasks={"a": SubTaskState(name="a", status="failed", decision="rl", feedback=feedback)})
    text = summary(planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="a")]), state)
    assert text.startswith("- a (rl): failed, success 0%; First sentence is here.")
    assert text.endswith("First sentence is here. ...") and len(text) < 500


def test_a_plan_that_misses_the_goal_gets_the_task_appended_under_a_free_name() -> None:
    task = common_pb2.TaskSpec(name="place_table", description="place a table", success=[TABLE])  # as resolved
    goal = task_subtask(task, Decision.RL)
    assert list(goal.success) == [TABLE] and goal.decision == planner_pb2.DECISION_RL
    ending = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="wood", success=[WOOD]),
                                        planner_pb2.SubTask(name="table", success=[TABLE, WOOD])], rationale="r")
    assert ending_in_goal(planner_pb2.Plan(subtasks=ending.subtasks), goal) == planner_pb2.Plan(
        subtasks=ending.subtasks)  # the last sub-task reaches the goal: unchanged
    side_quest = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="place_table", success=[WOOD])],
                                  rationale="wood first")
    completed = ending_in_goal(side_quest, goal)
    assert [st.name for st in completed.subtasks] == ["place_table", "place_table_goal"]
    assert completed.subtasks[-1].decision == planner_pb2.DECISION_RL and list(completed.subtasks[-1].success) == [
        TABLE]
    assert completed.rationale.startswith("wood first | the task itself was appended")
    assert goal.name == "place_table"  # the caller's goal is not renamed
    # A re-asked model copied the first plan's notes into its rationale: the note is said once.
    again = ending_in_goal(planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="wood", success=[WOOD])],
                                            rationale=completed.rationale), goal)
    assert again.rationale.count("the task itself was appended") == 1
    empty = ending_in_goal(planner_pb2.Plan(), task_subtask(common_pb2.TaskSpec(name="x"), Decision.CODE))
    assert [st.name for st in empty.subtasks] == ["x"] and empty.rationale.startswith("the task itself")


def test_without_a_critic_the_verdict_is_the_measured_rate_and_the_first_error() -> None:
    won, lost = common_pb2.EpisodeSummary(success=True), common_pb2.EpisodeSummary(success=False)
    verdict = measured_verdict([won, lost, lost, lost], [common_pb2.SkillError(type="Timeout", message="slow"),
                                                         common_pb2.SkillError(type="Other", message="x")], 0.5)
    assert not verdict.success and verdict.target == critic_pb2.TARGET_FAST and verdict.success_rate == 0.25
    assert verdict.diagnosis == "success rate 25%; error Timeout: slow"
    kept = measured_verdict([won, lost], [], 0.5)
    assert kept.success and kept.target == critic_pb2.TARGET_KEEP and kept.diagnosis == "success rate 50%"
    assert not measured_verdict([won, lost], [], 0.8).success  # the critic's threshold, where there is a critic
    assert measured_verdict([], [], 0.5).success_rate == 0.0


def test_curves_sent_to_the_critic_have_increasing_frames() -> None:
    points = [critic_pb2.CurvePoint(env_frames=f) for f in (0, 100, 100, 50, 200)]
    assert [p.env_frames for p in increasing(points)] == [0, 100, 200]


def test_the_controller_picks_the_plans_coded_skills_and_trained_policies_in_order() -> None:
    plan = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name=n) for n in ("a", "b", "c")])
    state = RunState(subtasks={"a": SubTaskState(name="a", skill_code="def skill(agent): yield 'do'"),
                               "b": SubTaskState(name="b", decision="rl", job_id="j1"),
                               "c": SubTaskState(name="c", decision="rl")})
    assert coded_skills(plan, state) == [("a", "def skill(agent): yield 'do'")]
    assert rl_jobs(plan, state) == [("b", "j1")]
    assert rl_jobs(None, state) == [] and coded_skills(None, state) == []


def test_the_chain_has_a_link_per_subtask_with_a_controller_in_plan_order() -> None:
    plan = planner_pb2.Plan(subtasks=[planner_pb2.SubTask(name="wood", success=[WOOD]),
                                      planner_pb2.SubTask(name="table", success=[TABLE]),
                                      planner_pb2.SubTask(name="later")])
    state = RunState(subtasks={"wood": SubTaskState(name="wood", skill_code="def skill(agent): yield 'do'"),
                               "table": SubTaskState(name="table", decision="rl", job_id="j1",
                                                     rl_config={"episode_length": 400}),
                               "later": SubTaskState(name="later", decision="rl")})
    links, missing = chain_links(plan, state, skill_frames=300, skill_names={"wood": "wood__chainabc"})
    assert [(link.name, link.WhichOneof("controller"), link.max_frames) for link in links] == [
        ("wood", "skill", 300), ("table", "job_id", 400)]
    assert links[0].skill == "wood__chainabc" and links[1].job_id == "j1"
    assert list(links[0].success) == [WOOD] and list(links[1].success) == [TABLE]
    assert missing == ["later"]  # an RL sub-task not trained yet has no controller


def test_records_keep_the_state_json_shape_of_earlier_runs(tmp_path: Path) -> None:
    old = {"subtasks": {"wood": {"name": "wood", "status": "done", "decision": "code", "tests": [
        {"iteration": 0, "kind": "code", "frames": 300, "success_rate": 1.0, "error": ""}]}},
        "iterations": [{"iteration": 0, "tokens": 10, "seconds": 1.5, "frames": 300}],
        "final": {"episodes": 8, "frames_used": 300, "controller": "chain of coded skills", "success_rate": 0.5,
                  "returns": [1.0]}}
    (tmp_path / "state.json").write_text(json.dumps(old))
    state = RunState.load(tmp_path)
    wood = state.subtasks["wood"]
    assert wood.status is Status.DONE and wood.decision is Decision.CODE and wood.last_error == ""
    wood.record(TestRecord(iteration=1, kind=Decision.RL, error="refused", frames=300))
    wood.record(TestRecord(iteration=1, kind=Decision.RL, job_id="j", success_rate=0.5, frames=900))
    state.save(tmp_path)
    saved = json.loads((tmp_path / "state.json").read_text())
    assert saved["subtasks"]["wood"]["status"] == "done" and saved["subtasks"]["wood"]["tests"] == [
        {"iteration": 0, "kind": "code", "frames": 300, "success_rate": 1.0, "error": ""},
        {"iteration": 1, "kind": "rl", "success_rate": 0.0, "frames": 300, "error": "refused"},
        {"iteration": 1, "kind": "rl", "success_rate": 0.5, "frames": 900, "error": "", "job_id": "j"}]
    assert saved["iterations"] == old["iterations"] and saved["final"] == old["final"]
    assert FinalResult(episodes=8, frames_used=3, controller="none").as_json() == {
        "episodes": 8, "frames_used": 3, "controller": "none", "success_rate": 0.0}
    (tmp_path / "state.json").write_text(json.dumps({"subtasks": {"x": {"name": "x", "status": "half"}}}))
    with pytest.raises(FailedPrecondition, match="corrupt"):
        RunState.load(tmp_path)


def loops(tmp_path: Path, mode: str = "", agents: str = "", task: str = "place_table", llm=None, *,
          learner=None, critic=None, **settings: Any) -> TwoLoops:
    # The task as the planner keeps it: spelled out by the env server's ResolveTask when the run started.
    spec = common_pb2.TaskSpec(name=task, success=[common_pb2.Condition(achievement=task)])
    request = planner_pb2.StartRunRequest(task=spec, mode=mode, agents=agents)
    run = Run(tmp_path / "run", request)
    describe = env_pb2.DescribeResponse(backend="crafter", items=["wood"])
    return TwoLoops(run, RunState(), describe, llm, SkillLibrary(tmp_path / "library.json"),
                    Stubs(env=None, learner=learner, critic=critic),
                    PlannerSettings(**{"env_frames_per_training": 900, **settings}))


def test_the_run_context_resolves_budgets_mode_and_agents(tmp_path: Path) -> None:
    ctx = loops(tmp_path).ctx
    assert ctx.mode is Mode.RL_GPT and ctx.agents is AgentSetup.SLOW_FAST_CRITIC
    assert ctx.budgets.env_frames_per_training == 900 and ctx.protocol.env_frames == 900
    assert ctx.frames_left() == ctx.budgets.total_env_frames
    ctx.spend(SubTaskState(name="x"), ctx.budgets.total_env_frames + 5)
    assert ctx.frames_left() == 0


def test_spending_and_saving_from_many_threads_keeps_the_count_and_a_whole_state(tmp_path: Path) -> None:
    ctx = loops(tmp_path).ctx
    subs = [SubTaskState(name=f"s{i}") for i in range(6)]
    ctx.state.subtasks = {s.name: s for s in subs}

    errors: list[BaseException] = []

    def work(sub: SubTaskState) -> None:
        try:
            for _ in range(40):
                ctx.spend(sub, 3)
                ctx.save()  # one tmp path for every thread: without the lock one moves what another writes
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(sub,)) for sub in subs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ctx.state.frames_used == 6 * 40 * 3 and all(s.frames == 120 for s in subs)
    assert RunState.load(ctx.run.dir).frames_used == 720


def test_pure_code_codes_every_subtask_of_the_plan(tmp_path: Path) -> None:
    two = loops(tmp_path, mode="pure-code")
    two._adopt_plan(planner_pb2.Plan(subtasks=[
        planner_pb2.SubTask(name="wood", success=[WOOD], decision=planner_pb2.DECISION_RL),
        planner_pb2.SubTask(name="table", success=[TABLE], decision=planner_pb2.DECISION_CODE)]))
    assert {n: s.decision for n, s in two.state.subtasks.items()} == {"wood": Decision.CODE, "table": Decision.CODE}
    assert json.loads((tmp_path / "run" / "state.json").read_text())["subtasks"]["wood"]["decision"] == "code"


def test_the_one_setup_has_one_agent_write_plan_code_and_configs(tmp_path: Path) -> None:
    two = loops(tmp_path, agents="one", llm=object())  # an LLM never called here
    assert isinstance(two.one, OneAgent) and isinstance(two.attempts.fast, WrittenAnswers)
    assert loops(tmp_path / "b", agents="slow-fast", llm=object()).one is None
    # Without an LLM every setup has the whole task as its one sub-task (pure RL's plan).
    plan = loops(tmp_path / "c", agents="one")._new_plan(None)
    assert [st.name for st in plan.subtasks] == ["place_table"] and list(plan.subtasks[0].success) == [TABLE]


def test_rl_attempts_without_a_learner_go_back_to_the_slow_agent(tmp_path: Path) -> None:
    two = loops(tmp_path)
    state = SubTaskState(name="table", decision="rl")
    subtask = planner_pb2.SubTask(name="table", success=[TABLE])
    verdict = Attempts(two.ctx, None).rl(subtask, state, [], planner_pb2.Plan(subtasks=[subtask]))
    assert verdict.target == critic_pb2.TARGET_SLOW and "no learner" in state.feedback


# --- the RL sub-tasks of an iteration train together -------------------------------------------------------------
class Log:
    """What the test doubles saw, in order, with times (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: list[tuple[str, str, float]] = []

    def add(self, what: str, name: str) -> None:
        with self.lock:
            self.entries.append((what, name, time.monotonic()))

    def names(self, what: str) -> list[str]:
        return [name for kind, name, _ in self.entries if kind == what]

    def at(self, what: str, name: str) -> float:
        return next(t for kind, n, t in self.entries if kind == what and n == name)

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.entries]


class FakeFast:
    """A test double of the fast agent: an RL config per sub-task (a recorded LLM call) and no macro action."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.offers: list[tuple[str, int]] = []

    def write_rl(self, st: planner_pb2.SubTask, *, env_frames: int, iteration: int, **_: Any) -> RLAnswer:
        self.log.add("config", st.name)
        self.offers.append((st.name, env_frames))
        record = CallRecord(seq=0, agent="fast", iteration=iteration, model="fake", messages=[], response="{}",
                            parsed={}, prompt_tokens=1, completion_tokens=1, latency_seconds=0.0, attempts=1)
        config = learner_pb2.RLConfig(name=st.name, task=common_pb2.TaskSpec(name=st.name), env_frames=env_frames)
        return RLAnswer(config=config, macro_actions=[], record=record)

    def register_macro_actions(self, st: planner_pb2.SubTask, macros: list[Any]) -> MacroActions:
        return MacroActions()


class ThreadedLearner:
    """A test double of the learner, called from the training threads: each job reports ``points`` progress points
    ``seconds`` apart (``slower`` jobs take three times as long) up to its config's frames. ``meet``: a job waits
    (at most a second) for a second job to run beside it. ``stop_when_running``: StopRun is called once that many
    jobs run. ``fails``: jobs of these sub-tasks end FAILED."""

    def __init__(self, log: Log, run: Run | None = None, *, points: int = 4, seconds: float = 0.05,
                 slower: tuple[str, ...] = (), meet: bool = False, stop_when_running: int = 0,
                 fails: tuple[str, ...] = (), success: float = 0.0) -> None:
        self.log, self.run, self.points, self.seconds = log, run, points, seconds
        self.slower, self.meet, self.stop_when_running, self.fails, self.success = \
            slower, meet, stop_when_running, fails, success
        self.lock = threading.Lock()
        self.running = 0
        self.most_running = 0
        self.together = threading.Event()
        self.configs: dict[str, learner_pb2.RLConfig] = {}
        self.stopped: list[str] = []

    def StartTraining(self, request: learner_pb2.StartTrainingRequest) -> learner_pb2.StartTrainingResponse:
        job_id = f"job-{request.config.name}"
        self.configs[job_id] = request.config
        self.log.add("start", request.config.name)
        return learner_pb2.StartTrainingResponse(job_id=job_id)

    def WatchJob(self, request: learner_pb2.WatchJobRequest, timeout: float):
        name = self.configs[request.job_id].name
        frames = self.configs[request.job_id].env_frames
        with self.lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            if self.running >= 2:
                self.together.set()
            if self.stop_when_running and self.running >= self.stop_when_running:
                self.run.stop_requested.set()  # StopRun while the trainings run
        try:
            if self.meet:
                self.together.wait(timeout=1.0)
            pause = self.seconds * (3 if name in self.slower else 1)
            for i in range(1, self.points + 1):
                time.sleep(pause)
                last = i == self.points
                state = learner_pb2.JOB_STATE_RUNNING if not last else (
                    learner_pb2.JOB_STATE_FAILED if name in self.fails else learner_pb2.JOB_STATE_SUCCEEDED)
                yield learner_pb2.JobProgress(job_id=request.job_id, env_frames=frames * i // self.points,
                                              success_rate=0.1 * i, mean_return=float(i), state=state,
                                              message="worker died" if last and name in self.fails else "")
        finally:
            self.log.add("end", name)
            with self.lock:
                self.running -= 1

    def StopJob(self, request: learner_pb2.StopJobRequest) -> learner_pb2.StopJobResponse:
        self.stopped.append(request.job_id)
        return learner_pb2.JobProgress(job_id=request.job_id)

    def Evaluate(self, request: learner_pb2.EvaluateRequest, timeout: float) -> learner_pb2.EvaluateResponse:
        self.log.add("evaluate", self.configs[request.job_id].name)
        won = int(self.success * 4)
        return learner_pb2.EvaluateResponse(success_rate=self.success, episodes=[
            common_pb2.EpisodeSummary(success=i < won) for i in range(4)])


class OrderedCritic:
    """A test double of the critic: each verdict sends the sub-task back to the fast agent."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def DescribeCritic(self, request: critic_pb2.DescribeCriticRequest, timeout: float
                       ) -> critic_pb2.DescribeCriticResponse:
        return critic_pb2.DescribeCriticResponse(success_threshold=0.8, max_rollouts=256, max_code_bytes=65536,
                                                 max_frames=8, max_curve_points=10000)

    def Judge(self, request: critic_pb2.JudgeRequest, timeout: float) -> critic_pb2.JudgeResponse:
        self.log.add("judge", request.subtask)
        return critic_pb2.JudgeResponse(verdict=critic_pb2.Verdict(
            target=critic_pb2.TARGET_FAST, diagnosis=f"verdict on {request.subtask}"))


RL_PLAN = planner_pb2.Plan(subtasks=[
    planner_pb2.SubTask(name=name, decision=planner_pb2.DECISION_RL,
                        success=[common_pb2.Condition(achievement=name)])
    for name in ("table", "pickaxe", "sword")])


def rl_loops(tmp_path: Path, subtasks: int = 2, *, agents: str = "", **learner: Any) -> tuple[TwoLoops, Log]:
    """TwoLoops on a plan of RL sub-tasks with the test doubles above; ``learner`` has the learner's options and
    the planner's settings (parallel_trainings, max_inner_iterations, total_env_frames)."""
    log = Log()
    settings = {k: learner.pop(k) for k in ("parallel_trainings", "max_inner_iterations", "total_env_frames")
                if k in learner}
    two = loops(tmp_path, agents=agents, learner=None, critic=OrderedCritic(log), **settings)
    two.ctx.stubs.learner = ThreadedLearner(log, two.ctx.run, **learner)
    two.attempts.fast = FakeFast(log)
    two._adopt_plan(planner_pb2.Plan(subtasks=RL_PLAN.subtasks[:subtasks]))
    return two, log


def train_rl(two: TwoLoops) -> None:
    plan = two.state.plan_proto()
    two._train_rl(list(plan.subtasks), plan)


def test_two_rl_subtasks_train_at_once_with_two_parallel_trainings(tmp_path: Path) -> None:
    two, log = rl_loops(tmp_path, parallel_trainings=2, max_inner_iterations=1, meet=True, slower=("table",))
    train_rl(two)
    learner = two.ctx.stubs.learner
    assert learner.most_running == 2
    assert max(log.at("start", "table"), log.at("start", "pickaxe")) < min(log.at("end", "table"),
                                                                            log.at("end", "pickaxe"))
    assert log.names("end") == ["pickaxe", "table"]  # the slower table finishes last ...
    assert log.names("judge") == ["table", "pickaxe"]  # ... and is still judged first: plan order
    verdicts = [(e.subtask, e.verdict.diagnosis) for e in two.ctx.run.events if e.HasField("verdict")]
    assert verdicts == [("table", "verdict on table"), ("pickaxe", "verdict on pickaxe")]
    for name in ("table", "pickaxe"):  # the inner budget is spent: failed for this iteration, count reset
        sub = two.state.subtasks[name]
        assert sub.status is Status.FAILED and sub.inner_iterations == 0 and sub.job_id == f"job-{name}"
        assert sub.feedback == f"verdict on {name}" and [t["kind"] for t in sub.tests] == ["rl"]


def test_with_one_parallel_training_the_trainings_run_one_after_another(tmp_path: Path) -> None:
    two, log = rl_loops(tmp_path, parallel_trainings=1, max_inner_iterations=1, meet=True)
    train_rl(two)
    assert two.ctx.stubs.learner.most_running == 1
    assert log.at("end", "table") <= log.at("start", "pickaxe")  # each evaluated before the next starts
    assert log.kinds() == ["config", "config", "start", "end", "evaluate", "start", "end", "evaluate",
                           "judge", "judge"]


def test_the_configs_come_in_plan_order_before_any_training_and_the_llm_files_keep_that_order(
        tmp_path: Path) -> None:
    two, log = rl_loops(tmp_path, 3, parallel_trainings=2, max_inner_iterations=2)
    train_rl(two)
    kinds = log.kinds()
    first_round, second_round = kinds[:kinds.index("judge") + 3], kinds[kinds.index("judge") + 3:]
    for round_ in (first_round, second_round):  # 3 configs, 3 trainings, 3 verdicts, in that order
        assert round_[:3] == ["config"] * 3 and round_[-3:] == ["judge"] * 3
        assert set(round_[3:-3]) == {"start", "end", "evaluate"}
    assert log.names("config") == ["table", "pickaxe", "sword"] * 2
    assert log.names("judge") == ["table", "pickaxe", "sword"] * 2
    files = sorted(p.name for p in (two.ctx.run.dir / "llm").glob("*.json"))
    assert [f.split("-")[2] for f in files] == ["table", "pickaxe", "sword"] * 2
    assert all(two.state.subtasks[n].status is Status.FAILED for n in ("table", "pickaxe", "sword"))
    assert all(len(two.state.subtasks[n].tests) == 2 for n in ("table", "pickaxe", "sword"))


def test_each_training_of_a_round_gets_its_share_of_the_frames_left(tmp_path: Path) -> None:
    two, _ = rl_loops(tmp_path, 3, parallel_trainings=3, max_inner_iterations=3, total_env_frames=2000)
    train_rl(two)
    offers = two.attempts.fast.offers
    # Round 1: 2000 left among 3 (each under the 900 per training); then 2 left, 0 frames each: no round 2.
    assert offers == [("table", 666), ("pickaxe", 666), ("sword", 666)]
    assert two.state.frames_used == 1998 <= two.ctx.budgets.total_env_frames
    assert {n: s.feedback for n, s in two.state.subtasks.items()} == {
        n: "the run's frame budget is spent" for n in ("table", "pickaxe", "sword")}


def test_a_share_never_exceeds_the_per_training_budget_and_a_later_round_shares_what_is_left(
        tmp_path: Path) -> None:
    two, _ = rl_loops(tmp_path, 2, parallel_trainings=2, max_inner_iterations=3, total_env_frames=2400)
    train_rl(two)
    assert two.attempts.fast.offers == [("table", 900), ("pickaxe", 900), ("table", 300), ("pickaxe", 300)]
    assert two.state.frames_used == 2400 == two.ctx.budgets.total_env_frames


def test_a_stop_during_the_trainings_stops_every_job_and_the_round_is_redone_on_resume(tmp_path: Path) -> None:
    two, log = rl_loops(tmp_path, 3, parallel_trainings=2, max_inner_iterations=2, stop_when_running=2,
                        points=20)
    with pytest.raises(StopRequested):
        train_rl(two)
    learner = two.ctx.stubs.learner
    assert sorted(learner.stopped) == ["job-pickaxe", "job-table"]  # each thread stopped its own job
    assert log.names("start") == ["table", "pickaxe"]  # the third waited for a thread and never started
    assert not log.names("evaluate") and not log.names("judge")
    assert not any(e.HasField("verdict") for e in two.ctx.run.events)
    saved = RunState.load(two.ctx.run.dir)
    assert {n: (s.status, s.inner_iterations) for n, s in saved.subtasks.items()} == {
        n: (Status.PENDING, 0) for n in ("table", "pickaxe", "sword")}  # resumable: nothing counted


def test_a_training_that_fails_stops_the_others_and_its_error_is_raised(tmp_path: Path) -> None:
    two, log = rl_loops(tmp_path, 2, parallel_trainings=2, max_inner_iterations=1, fails=("pickaxe",),
                        slower=("table",), points=30, meet=True)
    with pytest.raises(FailedPrecondition, match=r"training of pickaxe .* did not finish: worker died"):
        train_rl(two)
    learner = two.ctx.stubs.learner
    assert learner.stopped == ["job-table"] and learner.running == 0  # no job left running unwatched
    assert log.names("end") == ["pickaxe", "table"] and not log.names("judge")


def test_a_passed_subtask_leaves_the_rounds_and_the_others_go_on(tmp_path: Path) -> None:
    two, log = rl_loops(tmp_path, 2, agents="slow-fast", parallel_trainings=2, max_inner_iterations=2,
                        success=1.0)  # no critic's verdicts: the measured rate passes both at the critic's 0.8
    train_rl(two)
    assert log.names("config") == ["table", "pickaxe"] and not log.names("judge")
    assert all(two.state.subtasks[n].status is Status.DONE for n in ("table", "pickaxe"))


def test_the_one_agent_gets_one_rl_attempt_per_subtask_and_outer_iteration(tmp_path: Path) -> None:
    two, log = rl_loops(tmp_path, 2, agents="one", parallel_trainings=2, max_inner_iterations=3)
    two.one = object()  # the one agent's answers: one attempt each (its revision is its next outer answer)
    train_rl(two)
    assert log.names("config") == ["table", "pickaxe"]
    assert all(two.state.subtasks[n].status is Status.FAILED for n in ("table", "pickaxe"))


def test_coded_subtasks_go_first_then_the_rl_ones_together(tmp_path: Path) -> None:
    two, log = rl_loops(tmp_path, 2, parallel_trainings=2, max_inner_iterations=1)
    wood = planner_pb2.SubTask(name="wood", decision=planner_pb2.DECISION_CODE, success=[WOOD])
    two._adopt_plan(planner_pb2.Plan(subtasks=[two.state.plan_proto().subtasks[0], wood,
                                               two.state.plan_proto().subtasks[1]]))
    two.ctx.budgets.max_outer_iterations = 1

    def code(st: planner_pb2.SubTask, state: SubTaskState, start: list[common_pb2.ItemCount], plan: Any):
        log.add("code", st.name)
        return critic_pb2.Verdict(success=True, target=critic_pb2.TARGET_KEEP)

    two.attempts.code = code
    two._evaluate_iteration = lambda record, plan: None  # the chain's evaluation is the controller's (tested apart)
    two._iterate()
    assert log.kinds()[:3] == ["code", "config", "config"] and log.names("config") == ["table", "pickaxe"]
    assert two.state.subtasks["wood"].status is Status.DONE
    assert len(two.state.iterations) == 1


def test_pure_rl_still_trains_its_one_config(tmp_path: Path) -> None:
    two = loops(tmp_path, mode="pure-rl")
    log = Log()
    two.ctx.stubs.learner = ThreadedLearner(log, success=0.5)
    two._pure_rl()
    sub = two.state.subtasks["place_table"]
    assert log.names("start") == ["place_table"] and sub.job_id == "job-place_table"
    assert sub.tests[-1]["success_rate"] == 0.5 and sub.frames == two.state.frames_used > 0

