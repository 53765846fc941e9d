"""The planner's settings; the loader and the settings services share are in :mod:`rlgpt.config`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from rlgpt.config import Settings, setting


@dataclasses.dataclass(frozen=True)
class PlannerSettings(Settings):
    """Settings of the planner (``RLGPT_PLANNER_*``); the LLM has its own (``RLGPT_LLM_*``)."""

    env_prefix: ClassVar[str] = "RLGPT_PLANNER"

    env_server: str = setting("127.0.0.1:50051", "Address of the env server (Describe, RegisterSkill, RunSkill).")
    learner: str = setting("", "Address of the learner; empty: RL sub-tasks get configs but are not trained.")
    critic: str = setting("", "Address of the critic; empty: no verdicts.")
    run_dir: str = setting("runs", "Directory under which each run gets its own directory.")
    library_path: str = setting("runs/skill_library.json", "The skill library shared by runs.")
    # A run's budgets (rlgpt.v1.Budgets): the planner's defaults for the fields a StartRun leaves unset, and
    # (ge/le) the range StartRun accepts for a set field. The fields are named as in Budgets.
    max_outer_iterations: int = setting(4, "Budget: max outer (slow agent) iterations O of a run: the run goes on "
                                           "until the whole task reaches target_success or this or the frames "
                                           "are spent.", ge=1, le=20)
    max_inner_iterations: int = setting(2, "Budget: max inner (fast agent) iterations I per sub-task.", ge=1,
                                        le=20)
    env_frames_per_training: int = setting(15000, "Budget: env frames of one RL training.", ge=1)
    total_env_frames: int = setting(60000, "Budget: env frames a whole run may spend on skill tests and "
                                           "training (the final evaluation is not counted); 0: unbounded.", ge=0)
    game_env_frames: int = setting(1_000_000, "Budget: the frame budget of a task whose objective is the whole "
                                              "game (TaskSpec.objective game) where StartRun leaves "
                                              "total_env_frames unset: every frame counted, evaluations included "
                                              "(the game's benchmark budget).", ge=1)
    eval_episodes: int = setting(32, "Budget: evaluation episodes E of a trained policy, of the whole task after "
                                     "every outer iteration and at the end (every controller of a run on the same "
                                     "worlds; 32 tell a 75% from a 50% controller, 8 do not).", ge=1, le=256)
    target_success: float = setting(0.8, "Budget: the whole task's success rate (0..1) at which a run is done; "
                                         "below it the run goes on while outer iterations and frames last.",
                                    ge=0.0, le=1.0)
    candidates: int = setting(1, "Budget: skill candidates N drawn per fast-agent step; the best by test "
                                 "success is kept.", ge=1, le=16)
    max_tokens: int = setting(0, "Budget: LLM tokens a whole run may use; 0: unbounded.", ge=0)
    test_episodes: int = setting(4, "Test episodes per skill candidate (RunSkill).", ge=1, le=64)
    test_steps: int = setting(300, "Frames per skill test episode.", ge=1)
    final_episode_frames: int = setting(1000, "Frames of one whole-task episode: the final evaluation's, and "
                                              "pure RL's training episodes.", ge=1)
    max_active_runs: int = setting(2, "Runs that may be active at once.", ge=1)
    skill_format: str = setting("auto", "How the fast agent writes a skill: python (Python code), program (a short "
                                        "JSON skill program over generic steps, compiled to Python; for small "
                                        "models) or auto (program for the embedded models, python otherwise). "
                                        "Also read from RLGPT_SKILL_FORMAT.", choices=("auto", "python", "program"),
                                env="RLGPT_SKILL_FORMAT")
    plan_check: str = setting("auto", "Whether the slow agent's plans are checked against the world's rules (a plan "
                                      "that skips a prerequisite, orders it wrongly or adds a side quest goes back "
                                      "once, then is repaired from the rules): on, off, or auto (on where the fast "
                                      "agent writes skill programs, i.e. for the small embedded models, whose "
                                      "sub-task and condition names are also enums of the goal's prerequisites "
                                      "and the needs the critic named; a capable model's judgment, such as "
                                      "drinking on a long task, is left to the critic).",
                              choices=("auto", "on", "off"))
    parallel_trainings: int = setting(2, "RL sub-tasks of one outer iteration that train at once (a learner job "
                                         "each); 1: one after another.", ge=1)
    keep_plan: bool = setting(True, "When every sub-task is done (coded, or trained by RL: its policy plays its "
                                    "step) but the whole task's chain still fails in some worlds, train a policy "
                                    "around the plan with the frames left (the plan is one macro action next to the "
                                    "primitives; RL learns when to step in) and keep it as the final controller if "
                                    "it scores better on the same worlds.")
    kept_plan_revisions: int = setting(1, "Times the fast agent revises its config for RL around the kept plan (told "
                                          "its previous answer, its refused macro actions, that training's "
                                          "learning curve, what the policy chose, and how the policy and the plan "
                                          "alone did on worlds of "
                                          "the revision's own) after a training whose policy "
                                          "did not beat the plan alone; each revision trains again while frames "
                                          "last. 0: none.", ge=0)
