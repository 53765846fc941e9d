"""The link-stepping rules of a chain evaluation, without env or model."""

import pytest

from services.learner.chain_links import Link, LinkStepper

WOOD, TABLE, PICKAXE = Link("wood", skill="collect_wood"), Link("table", job_id="j1"), Link("pickaxe", job_id="j2")


def stats(stepper: LinkStepper) -> list[tuple[str, int, int, float]]:
    return [(s.name, s.reached, s.succeeded, s.mean_frames) for s in stepper.stats()]


def test_a_done_stage_starts_the_next_link() -> None:
    stepper = LinkStepper([WOOD, TABLE, PICKAXE], num_envs=2)
    assert [stepper.controller(i) for i in range(2)] == [0, 0]
    stepper.after_step(0, frames=30, stages_done=[False, False, False])
    stepper.after_step(0, frames=20, stages_done=[True, False, False])
    stepper.after_step(1, frames=40, stages_done=[False, False, False])
    assert [stepper.controller(i) for i in range(2)] == [1, 0]
    stepper.after_step(0, frames=1, stages_done=[True, True, False])
    assert stepper.controller(0) == 2 and stepper.spent[0] == 0
    assert stats(stepper)[:2] == [("wood", 2, 1, 45.0), ("table", 1, 1, 1.0)]


def test_links_already_done_are_passed_at_once() -> None:
    stepper = LinkStepper([WOOD, TABLE, PICKAXE], num_envs=1)
    stepper.after_step(0, frames=1, stages_done=[True, True, False])  # wood and table held together
    assert stepper.controller(0) == 2
    assert stats(stepper) == [("wood", 1, 1, 1.0), ("table", 1, 1, 0.0), ("pickaxe", 1, 0, 0.0)]


def test_the_probe_step_passes_links_done_at_the_start_and_books_no_frames() -> None:
    stepper = LinkStepper([WOOD, TABLE], num_envs=2)
    stepper.after_step(0, frames=1, stages_done=[True, False], probe=True)  # e.g. wood in the start inventory
    stepper.after_step(1, frames=1, stages_done=[False, False], probe=True)
    assert [stepper.controller(i) for i in range(2)] == [1, 0] and stepper.spent == [0, 0]
    assert stats(stepper) == [("wood", 2, 1, 0.0), ("table", 1, 0, 0.0)]


def test_after_the_last_link_its_controller_acts_on_and_nothing_more_is_counted() -> None:
    stepper = LinkStepper([WOOD, TABLE], num_envs=1)
    stepper.after_step(0, frames=5, stages_done=[True, True])
    assert stepper.controller(0) == 1 and stepper.current[0] == 2
    stepper.after_step(0, frames=7, stages_done=[True, True])
    assert stepper.controller(0) == 1
    assert stats(stepper) == [("wood", 1, 1, 5.0), ("table", 1, 1, 0.0)]


def test_the_frame_budget_ends_a_link_without_success() -> None:
    stepper = LinkStepper([Link("wood", skill="collect_wood", max_frames=50), TABLE], num_envs=1)
    stepper.after_step(0, frames=32, stages_done=[False, False])
    assert stepper.controller(0) == 0
    stepper.after_step(0, frames=32, stages_done=[False, False])
    assert stepper.controller(0) == 1
    assert stats(stepper) == [("wood", 1, 0, 64.0), ("table", 1, 0, 0.0)]


def test_a_policy_link_is_ended_by_its_budget_only() -> None:
    stepper = LinkStepper([Link("table", job_id="j1", max_frames=3), PICKAXE], num_envs=1)
    stepper.after_step(0, frames=1, stages_done=[False, False], skill_error=True)  # the policy's own skill failed
    stepper.after_step(0, frames=1, stages_done=[False, False], skill_finished=True)
    assert stepper.controller(0) == 0
    stepper.after_step(0, frames=1, stages_done=[False, False])
    assert stepper.controller(0) == 1


@pytest.mark.parametrize("outcome", [dict(skill_error=True, frames=5), dict(frames=0),
                                     dict(skill_finished=True, frames=1)])
def test_a_failed_or_idle_skill_moves_on(outcome: dict) -> None:
    stepper = LinkStepper([WOOD, TABLE], num_envs=1)
    stepper.after_step(0, stages_done=[False, False], **outcome)
    assert stepper.controller(0) == 1
    assert stats(stepper)[0][:3] == ("wood", 1, 0)


def test_a_skill_that_returns_after_acting_is_started_again() -> None:
    stepper = LinkStepper([WOOD, TABLE], num_envs=1)
    stepper.after_step(0, frames=12, stages_done=[False, False], skill_finished=True)
    assert stepper.controller(0) == 0


def test_a_skill_error_with_the_stage_done_counts_as_success() -> None:
    stepper = LinkStepper([WOOD, TABLE], num_envs=1)
    stepper.after_step(0, frames=9, stages_done=[True, False], skill_error=True)
    assert stepper.controller(0) == 1 and stats(stepper)[0][:3] == ("wood", 1, 1)


def test_only_the_first_episode_counts() -> None:
    stepper = LinkStepper([WOOD, TABLE], num_envs=2)
    stepper.after_step(0, frames=10, stages_done=[True, True], episode_ended=True)  # no link starts after the end
    stepper.after_step(1, frames=10, stages_done=[False, False], episode_ended=True)
    assert stepper.controller(0) is None and stepper.controller(1) is None
    stepper.after_step(0, frames=10, stages_done=[True, False])
    assert stats(stepper) == [("wood", 2, 1, 10.0), ("table", 0, 0, 0.0)]


def test_a_chain_needs_a_link() -> None:
    with pytest.raises(ValueError):
        LinkStepper([], num_envs=1)
