import pytest

from rlgpt.errors import FailedPrecondition, InvalidArgument
from rlgpt.v1 import common_pb2, learner_pb2
from services.learner.rl_config import DEFAULT_ENVS_PER_WORKER, EnvVocabulary, check_device, validate_rl_config
from services.learner.servicer import pure_rl_baseline
from services.learner.settings import LearnerSettings

VOCAB = EnvVocabulary(backend="crafter", actions=("noop", "move_left", "do"), achievements=("collect_wood",),
                      items=("wood",), reward_kinds=("success", "step", "inventory_gain"), skills=("chop",),
                      max_skill_steps=100, max_episode_length=10000, max_envs_per_session=16,
                      vector_labels=("status/health", "inventory/wood"), threats=("zombie",), max_threat_distance=8,
                      default_skill_steps=32, max_stages=2)
PLAN = [learner_pb2.PlanStep(skill="chop", success=[common_pb2.Condition(achievement="collect_wood")])]
SETTINGS = LearnerSettings(max_workers=2)


def config(**fields) -> learner_pb2.RLConfig:
    base = dict(task=common_pb2.TaskSpec(name="collect_wood"), env_frames=1000)
    base.update(fields)
    return learner_pb2.RLConfig(**base)


def test_defaults_are_filled() -> None:
    filled = validate_rl_config(config(skills=["chop"], observe=["status", "inventory/wood"]), VOCAB, SETTINGS)
    assert filled.backend == "crafter" and filled.runner == "local" and filled.skill_max_steps == 32
    assert filled.num_workers >= 1 and filled.envs_per_worker == DEFAULT_ENVS_PER_WORKER
    assert filled.episode_length == 1000


@pytest.mark.parametrize(("fields", "needle"), [
    ({"primitive_actions": ["fly"]}, "unknown action 'fly'"),
    ({"skills": ["teleport"]}, "unknown skill 'teleport'"),
    ({"env_frames": 0}, "env_frames=0"),
    ({"env_frames": -5}, "env_frames=-5"),
    ({"skill_max_steps": -1}, "K must be >= 1"),
    ({"reward_terms": [common_pb2.RewardTerm(kind="joy")]}, "unknown kind 'joy'"),
    ({"num_workers": 64}, "num_workers=64"),
    ({"runner": "slurm"}, "runner='slurm'"),
    ({"envs_per_worker": 17}, "envs_per_worker=17: a rollout worker's envs share one env-server session and the env "
                              "server allows 16 envs per session"),
    ({"observe": ["status", "mood"]}, "observe: unknown 'mood'; name a vector label or group: status, inventory, "
                                      "status/health, inventory/wood"),
    ({"plan_prior": 0.9}, "plan_prior is the plan action's starting probability: it needs a plan"),
    ({"plan_prior": 1.0, "plan": [learner_pb2.PlanStep(skill="chop", success=[
        common_pb2.Condition(achievement="collect_wood")])]}, "plan_prior=1.0: must be a probability, at least 0 and "
                                                               "below 1"),
    ({"plan_prior": -0.5}, "plan_prior=-0.5: must be a probability"),
    ({"plan_interrupt": common_pb2.PlanInterrupt(damage=True)}, "plan_interrupt says when a plan action ends early: "
                                                                 "it needs a plan"),
    ({"plan": PLAN, "plan_interrupt": common_pb2.PlanInterrupt(threat_within=9)},
     "plan_interrupt.threat_within=9: must be in 1..8 cells"),
    ({"plan": PLAN, "plan_interrupt": common_pb2.PlanInterrupt(threat_within=-1)},
     "plan_interrupt.threat_within=-1: must be in 1..8 cells"),
    ({"num_epochs": 17}, "num_epochs=17: must be in 1..16 (0: the learner's default)"),
    ({"num_minibatches": -1}, "num_minibatches=-1: must be in 1..16 (0: the learner's default)"),
    ({"num_workers": 2, "envs_per_worker": 3, "num_minibatches": 4},
     "num_minibatches=4: a batch holds 6 trajectories (num_workers x envs_per_worker), which it must divide evenly"),
])
def test_bad_config(fields: dict, needle: str) -> None:
    with pytest.raises(InvalidArgument, match="invalid RL config") as info:
        validate_rl_config(config(**fields), VOCAB, SETTINGS)
    assert needle in str(info.value)


def test_a_plan_interrupt_needs_threats_the_env_can_tell() -> None:
    interrupt = common_pb2.PlanInterrupt(damage=True, threat_within=3)
    filled = validate_rl_config(config(plan=PLAN, plan_interrupt=interrupt), VOCAB, SETTINGS)
    assert filled.plan_interrupt == interrupt
    blind = EnvVocabulary(**{**VOCAB.__dict__, "threats": ()})
    with pytest.raises(InvalidArgument, match=r"names no threats for crafter; use plan_interrupt\.damage"):
        validate_rl_config(config(plan=PLAN, plan_interrupt=interrupt), blind, SETTINGS)
    assert validate_rl_config(config(plan=PLAN, plan_interrupt=common_pb2.PlanInterrupt(damage=True)), blind, SETTINGS)


def test_every_problem_is_reported_together() -> None:
    with pytest.raises(InvalidArgument) as info:
        validate_rl_config(config(env_frames=0, skills=["x"], primitive_actions=["y"], skill_max_steps=-2), VOCAB,
                           SETTINGS)
    text = str(info.value)
    assert all(n in text for n in ("env_frames=0", "'x'", "'y'", "K must be"))


def test_pure_rl_baseline_drops_skills() -> None:
    baseline = pure_rl_baseline(config(skills=["chop"], skill_max_steps=8, name="wood"))
    assert list(baseline.skills) == [] and baseline.skill_max_steps == 1 and baseline.name == "wood__pure_rl"


@pytest.mark.parametrize(("fields", "device", "runner", "cuda", "refused"), [
    ({"gpu": True}, "cuda", "local", False, "gpu=true, but this machine has no CUDA device"),
    ({}, "cuda", "local", False, "RLGPT_LEARNER_DEVICE=cuda, but this machine has no CUDA device"),
    ({"gpu": True}, "cuda", "local", True, ""),
    ({"gpu": True}, "cpu", "kubernetes", False, ""),  # the Job asks its node for a GPU
    ({}, "cpu", "local", False, ""),
])
def test_a_gpu_job_needs_a_gpu_where_it_runs(fields: dict, device: str, runner: str, cuda: bool, refused: str) -> None:
    settings = LearnerSettings(device=device, runner=runner)
    if refused:
        with pytest.raises(FailedPrecondition, match=refused):
            check_device(config(**fields), settings, has_cuda=lambda: cuda)
    else:
        check_device(config(**fields), settings, has_cuda=lambda: cuda)


def prefix(skill: str = "chop", success=PLAN[0].success, max_frames: int = 200) -> common_pb2.PrefixStep:
    """One earlier link of the chain the training starts behind."""
    return common_pb2.PrefixStep(skill=skill, success=list(success), max_frames=max_frames)


def test_a_prefix_of_registered_skills_is_kept() -> None:
    filled = validate_rl_config(config(prefix=[prefix(), prefix(max_frames=10000)]), VOCAB, SETTINGS)
    assert [step.max_frames for step in filled.prefix] == [200, 10000]


@pytest.mark.parametrize(("steps", "needle"), [
    ([prefix(skill="")], "prefix[0].skill: empty; name the registered coded skill that does this step"),
    ([prefix(skill="teleport")], "prefix[0].skill: unknown skill 'teleport' (register it on the env server first)"),
    ([prefix(success=())], "prefix[0].success: empty; a prefix step needs the conditions that say it is done"),
    ([prefix(success=[common_pb2.Condition(achievement="fly")])], "prefix[0].success: unknown achievement 'fly'"),
    ([prefix(success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="gold", count=1))])],
     "prefix[0].success: unknown item 'gold'"),
    ([prefix(), prefix(max_frames=0)], "prefix[1].max_frames=0: must be in 1..10000 (the env server's "
                                       "max_episode_length)"),
    ([prefix(max_frames=10001)], "prefix[0].max_frames=10001: must be in 1..10000"),
    ([prefix()] * 3, "prefix: 3 steps; the env server runs at most 2 (its max_stages): start the training at a "
                     "later link"),
])
def test_a_bad_prefix_says_which_step_and_what_to_do(steps: list, needle: str) -> None:
    with pytest.raises(InvalidArgument, match="invalid RL config") as info:
        validate_rl_config(config(prefix=steps), VOCAB, SETTINGS)
    assert needle in str(info.value)
