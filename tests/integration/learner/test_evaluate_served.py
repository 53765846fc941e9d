"""A single job's evaluation: what it refuses before it reaches an env server."""

from pathlib import Path

from rlgpt.v1 import learner_pb2
from services.learner.evaluate import evaluate
from services.learner.jobs import write_job_config


def test_only_the_episodes_still_counted_are_stepped(env_server, tmp_path: Path) -> None:
    from prometheus_client import REGISTRY

    from rlgpt.v1 import common_pb2, env_pb2

    idle = "def skill(agent):\n    while True:\n        yield 'noop'\n"
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="eval_idle", code=idle, replace=True))
    job_dir = tmp_path / "job-idle"
    job_dir.mkdir()
    never = common_pb2.Condition(achievement="collect_diamond")
    write_job_config(job_dir, learner_pb2.RLConfig(
        name="idle", task=common_pb2.TaskSpec(name="collect_diamond"), primitive_actions=["noop"],
        plan=[learner_pb2.PlanStep(skill="eval_idle", success=[never])], skill_max_steps=50, episode_length=400), {})

    def stepped() -> float:
        return REGISTRY.get_sample_value("rlgpt_env_steps_total", {"backend": "crafter"}) or 0.0

    before = stepped()
    response = evaluate(job_dir, f"127.0.0.1:{env_server.port}", 4, 2, plan_alone=True)
    lengths = [e.steps for e in response.episodes]
    assert len(lengths) == 4 and len(set(lengths)) > 1  # idle players die at different frames, or time runs out
    # The frames stepped are the counted episodes' own: an env whose first episode ended is not stepped on (all
    # four stepped until the longest ended would be 4 x its length).
    assert stepped() - before == sum(lengths) < 4 * max(lengths)
    assert dict(response.action_shares) == {"plan": 1.0}  # the plan alone: every decision is the plan's
