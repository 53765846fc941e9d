"""bench-diamond: the recorded plan it keeps, and its section computed from the saved results."""

from __future__ import annotations

from benchmarks.crafter.diamond import PLAN_RUN, hands_back, load_plan, plan_config
from benchmarks.crafter.diamond_plot import plot_diamond
from benchmarks.crafter.diamond_report import (
    AGENT_TITLE,
    INTERRUPT_TITLE,
    PRIOR_TITLE,
    SECTION_TITLE,
    render_section,
    section_title,
)


def link(name: str, reached: int, succeeded: int) -> dict:
    return {"name": name, "reached": reached, "succeeded": succeeded, "mean_frames": 10.0}


def controller(rate: float, links: list[dict], ends: list[dict]) -> dict:
    return {"episodes": len(ends), "success_rate": rate, "frames": 100, "seconds": 1.0, "links": links, "ends": ends}


def end(success: bool, reason: str = "death", cause: str = "", steps: int = 50) -> dict:
    return {"success": success, "end_reason": reason, "death_cause": cause, "steps": steps}


def results() -> dict:
    chain = controller(0.25, [link("diamond_wood", 4, 4), link("diamond_iron", 4, 2), link("diamond_gem", 2, 1)],
                       [end(True, "success"), end(False, cause="attacked by zombie"),
                        end(False, cause="attacked by zombie and no drink"), end(False, cause="no food")])
    policy = controller(0.5, [link("diamond_wood", 4, 4), link("diamond_iron", 4, 3), link("diamond_gem", 3, 2)],
                        [end(True, "success"), end(True, "success"), end(False, cause="shot by skeleton"),
                         end(False, "time_limit")])
    return {"date_utc": "2026-11-25 08:00 UTC", "machine": {"cpu_model": "cpu", "cpu_count": 2, "ram_gib": 23.5,
                                                            "python": "3.11", "torch": "2", "sample_factory": "2",
                                                            "crafter": "1"},
            "run": {"task": "collect_diamond", "llm": "a model", "run": "docs/runs/x", "steps": ["wood", "iron", "gem"],
                    "k": 16, "reward": [["stage", 1.0], ["death", -1.0]], "primitives": ["noop", "do"],
                    "budget": 1000, "frames": 600, "complete": False, "train_episodes": 30, "rc": None,
                    "wall_s": 60.0, "train_s": 120.0, "chain": chain, "policy": policy, "job_dir": "j",
                    "curve": [{"frames": 300, "success_rate": 0.1, "stages_done": 1.0, "deaths": 0.9},
                              {"frames": 600, "success_rate": 0.3, "stages_done": 2.0, "deaths": 0.6}]}}


def test_the_section_says_what_the_results_say(tmp_path) -> None:
    text = render_section(results(), "fig.png")
    assert "| the chain alone | 25.0% | 4 | 50 | killed 1, killed and worn out 1, worn out 1 |" in text
    assert "| APPO around the kept plan, sampling | 50.0% | 4 | 50 |" in text
    assert "| iron | 100.0% / 50.0% | 2 | 100.0% / 75.0% | 1 |" in text
    assert "greedy" not in text.split("\n\n")[2]  # no greedy evaluation in these results: no such row
    assert "trained for 600 of 1,000 frames (partial) (30 training episodes, 2 min)" in text
    assert ("APPO around the kept plan, sampling: collect_diamond in 50.0% of the held-out worlds, 25.0 points above "
            "the chain alone (25.0%).") in text
    assert "from 10.0% (the first 300 frames) to 30.0% (the last window, by 600 frames)" in text
    assert plot_diamond(results(), tmp_path / "d.png").stat().st_size > 10_000


def test_the_kept_plan_is_the_recorded_runs_own() -> None:
    plan = load_plan(PLAN_RUN)
    assert plan.task == "collect_diamond" and plan.llm.startswith("Claude")
    assert [name for name, _, _ in plan.steps][:2] == ["collect_wood", "make_wood_pickaxe"]
    assert all(code and conditions for _, code, conditions in plan.steps)
    config = plan_config(plan, 1000, 0)
    assert len(config.plan) == len(plan.steps) and config.plan[-1].success[0].achievement == "collect_diamond"
    assert config.task.terminate_on_success and "do" in config.primitive_actions


def test_a_greedy_evaluation_gets_its_row_and_columns() -> None:
    data = results()
    data["run"]["policy_greedy"] = {**data["run"]["policy"], "success_rate": 0.75}
    text = render_section(data, None)
    assert "| APPO around the kept plan, greedy | 75.0% | 4 |" in text and "APPO greedy: reached / done" in text
    assert "greedy: collect_diamond in 75.0% of the held-out worlds, 50.0 points above the chain alone" in text
    data["run"]["policy_greedy"] = data["run"]["chain"]
    text = render_section(data, None)
    assert ("greedy: collect_diamond in 25.0% of the held-out worlds, equal to the chain alone (25.0%). Its 4 "
            "episodes ended exactly as the chain's (same frames, same ends).") in text


def test_the_fast_agents_config_gets_its_paragraph_rows_and_curve(tmp_path) -> None:
    data = results()
    agent_run = {**data["run"], "k": 8, "primitives": ["noop", "move_left"],
                 "reward": [["stage", 1.0], ["health", 0.5]],
                 "macro_actions": {"diamond_macro_fight": "def skill(agent): ..."}, "frames": 1000, "complete": True,
                 "policy": {**data["run"]["policy"], "success_rate": 0.75},
                 "chain": {**data["run"]["chain"], "success_rate": 0.5},
                 "curve": [{"frames": 500, "success_rate": 0.2, "stages_done": 1.0, "deaths": 0.5}]}
    data["agent"] = {"date_utc": "2026-11-25 11:00 UTC", "llm": "a capable model", "answer": "docs/runs/a.json",
                     "run": agent_run}
    text = render_section(data, None)
    assert ("The model (a capable model) answered the planner's prompt for RL around this plan" in text
            and "with K=8, the primitives noop, move_left, its macro actions fight, and reward stage +1, health "
                "+0.5" in text and "Trained for 1,000 of 1,000 frames (30 training episodes" in text)
    assert "| APPO with the fast agent's config, sampling | 75.0% | 4 |" in text
    assert "agent APPO: reached / done" in text
    assert "| the chain alone, at the fast agent's K | 50.0% | 4 |" in text
    assert "APPO with the fast agent's config, sampling: collect_diamond in 75.0% of the held-out worlds, 25.0 " \
           "points above the chain alone at the same K (50.0%)." in text
    assert "In training with the fast agent's config, the success rate went from 20.0%" in text
    assert plot_diamond(data, tmp_path / "d.png").stat().st_size > 10_000


def test_a_run_starting_on_the_plan_says_so_under_its_own_title() -> None:
    data = results()
    data["run"]["plan_prior"] = 0.9
    text = render_section(data, None, title=PRIOR_TITLE)
    assert text.startswith(PRIOR_TITLE + "\n")
    assert "the untrained policy starting on the plan action with probability 0.9 (`RLConfig.plan_prior`" in text
    assert "In training with the bench's config, starting on the plan (p=0.9), the success rate" in text
    assert "plan_prior" not in render_section(results(), None)


def test_a_run_whose_plan_hands_control_back_says_when_under_its_own_title() -> None:
    data = results()
    assert section_title(data) == SECTION_TITLE
    data["run"]["plan_prior"] = 0.5
    assert section_title(data) == PRIOR_TITLE
    data["run"]["interrupt"] = {"damage": True, "threat_within": 3, "threats": ["zombie", "arrow"]}
    assert section_title(data) == INTERRUPT_TITLE
    text = render_section(data, None, title=section_title(data))
    assert text.startswith(INTERRUPT_TITLE + "\n")
    assert ("a plan action handing control back before its K frames when the player is hurt or when a threat "
            "(zombie, arrow: the env's own list) is 3 cells away or closer (`RLConfig.plan_interrupt`") in text
    data["run"]["interrupt"] = {"damage": False, "threat_within": 0, "threats": ["zombie"]}
    assert section_title(data) == PRIOR_TITLE and "plan_interrupt" not in render_section(data, None)
    data["tag"] = "more-worlds"  # a run of its own (--tag): a section of its own
    assert section_title(data) == PRIOR_TITLE + ", run more-worlds"


def test_a_fast_agents_answer_with_interrupts_is_trained_and_told_as_the_planner_would() -> None:
    assert hands_back({"hand_back_within": 3}) and hands_back({"hand_back_when_hurt": True})
    assert not hands_back({"hand_back_when_hurt": False, "hand_back_within": 0}) and not hands_back({})
    data = results()
    data["run"].update(plan_prior=0.8, interrupt={"damage": True, "threat_within": 3, "threats": ["zombie"]})
    agent_run = {**data["run"], "k": 40, "macro_actions": {"diamond_macro_flee": "def skill(agent): ..."},
                 "interrupt": {"damage": False, "threat_within": 2, "threats": ["zombie"]}}
    data["agent"] = {"date_utc": "2026-11-27 05:00 UTC", "llm": "a capable model", "answer": "a.json",
                     "run": agent_run}
    text = render_section(data, None, title=section_title(data))
    assert ("with K=40, the primitives noop, do, its macro actions flee, a plan action handing control back before "
            "its K frames when a threat (zombie: the env's own list) is 2 cells away or closer (`RLConfig."
            "plan_interrupt`; the plan skill is suspended and the next plan action resumes it), and reward stage +1, "
            "death -1 (stage and success are the planner's); the policy starting on the plan action with "
            "probability 0.8, as the planner's does. Trained for") in text
    assert "In training with the fast agent's config, starting on the plan (p=0.8), the success rate" in text


def test_a_policy_and_its_chain_are_compared_world_by_world() -> None:
    data = results()
    text = render_section(data, None)
    assert ("World by world: it succeeded in 1 where the chain failed and failed in 0 where the chain succeeded "
            "(exact McNemar test, two-sided p = 1.00; a difference this size is within chance).") in text


def test_a_run_of_more_worlds_than_a_block_is_compared_block_by_block(monkeypatch) -> None:
    import benchmarks.crafter.diamond_report as report

    monkeypatch.setattr(report, "BLOCK", 2)  # the 4 worlds in 2 blocks: (won, lost) (won, lost) by the policy
    text = render_section(results(), None)
    assert ("By blocks of held-out worlds (each run plays them in the same order): worlds 1-2: 100.0% against "
            "50.0% (1 won, 0 lost); worlds 3-4: 0.0% against 0.0% (0 won, 0 lost).") in text
    monkeypatch.setattr(report, "BLOCK", 4)
    assert "By blocks" not in render_section(results(), None)


def test_a_run_says_what_the_policy_saw_and_how_plan_skills_ran() -> None:
    from benchmarks.crafter.diamond import PLAN_SKILLS_RUN

    data = results()
    text = render_section(data, None)
    assert "nearest threat" not in text and "plays the same at any K" not in text  # older runs recorded neither
    data["run"]["vector_labels"] = ["status/health", "threat/seen", "threat/x", "threat/y"]
    data["run"]["plan_skills_run"] = PLAN_SKILLS_RUN
    text = render_section(data, None)
    assert ("resumed by the next plan action, even if its stage got done meanwhile, so the chain alone plays the "
            "same at any K), the policy seeing the image and the observation vector, with the nearest threat in "
            "view and its offset (threat/seen, threat/x, threat/y)") in text
    data["run"]["observe"] = ["status"]  # a run that left the threat entries out
    assert "nearest threat" not in render_section(data, None)


def test_a_run_of_the_fast_agents_config_alone_gets_its_section_and_plot(tmp_path) -> None:
    # --agent-answer under a tag with no run of the bench's own config: the results hold the agent's run only.
    data = results()
    agent_run = {**data.pop("run"), "k": 80, "macro_actions": {"diamond_macro_shelter": "def skill(agent): ..."},
                 "interrupt": {"damage": True, "threat_within": 2, "threats": ["zombie"]},
                 "vector_labels": ["threat/seen", "threat/x"]}
    machine = data.pop("machine")
    data.pop("date_utc")
    data.update(tag="revised", agent={"date_utc": "2026-11-27 18:00 UTC", "machine": machine, "llm": "a model",
                                      "answer": "a.json", "run": agent_run})
    assert section_title(data) == AGENT_TITLE + ", run revised"
    text = render_section(data, None, title=section_title(data))
    assert "2026-11-27 18:00 UTC" in text and "The plan and its skills: the last plan of `x` (3 sub-tasks" in text
    assert "APPO around the kept plan (`RLConfig.plan`)" not in text  # no bench config was trained
    assert ("its macro actions shelter, the policy seeing the image and the observation vector, with the nearest "
            "threat in view and its offset (threat/seen, threat/x), a plan action handing control back") in text
    assert "| the chain alone, at the fast agent's K | 25.0% | 4 |" in text
    assert ("APPO with the fast agent's config, sampling: collect_diamond in 50.0% of the held-out worlds, 25.0 "
            "points above the chain alone (25.0%).") in text
    assert plot_diamond(data, tmp_path / "d.png").stat().st_size > 10_000


def test_the_training_curve_says_what_the_policy_chose(tmp_path) -> None:
    import json

    from benchmarks.crafter.diamond import training_curve

    (tmp_path / "episodes").mkdir()
    episodes = [{"time": t, "frames": 100, "success": t == 3, "end_reason": "death", "stages_done": 2,
                 "actions": actions} for t, actions in enumerate(
        [{"plan": 9, "do": 1}, {"plan": 10}, {"plan": 5, "skill:diamond_macro_shelter": 5}, {"plan": 5, "do": 5}])]
    episodes[:0] = [{"time": -t, "frames": 100, "success": False} for t in (2, 1)]  # recorded before decisions were
    (tmp_path / "episodes" / "worker0-0.jsonl").write_text("\n".join(json.dumps(e) for e in episodes))
    old, first, last = training_curve(tmp_path, window=2)
    assert "actions" not in old  # no share where no decision was recorded
    assert first["actions"] == {"plan": 0.95, "do": 0.05}
    assert last["actions"] == {"plan": 0.5, "skill:diamond_macro_shelter": 0.25, "do": 0.25}
    data = results()
    data["run"]["curve"] = [first, last]
    assert ("Its decisions (share of the policy's choices, a plan or macro action one choice however many frames it "
            "plays), the first window -> the last: the plan 95% -> 50%, do 5% -> 25%, shelter 0% -> 25%.") in \
        render_section(data, None)


def test_a_resumed_training_says_when_its_frames_were_trained() -> None:
    from benchmarks.crafter.run import training_span

    day = 1_795_800_000.0  # 2026-11-27 17:20 UTC
    progress = [{"time": day, "elapsed": 10.0}, {"time": day + 600, "elapsed": 610.0},
                {"time": day + 86_400, "elapsed": 5.0}, {"time": day + 90_000, "elapsed": 3605.0}]
    span = training_span(progress)
    assert span == {"from_utc": "2026-11-27 17:20 UTC", "to_utc": "2026-11-28 18:20 UTC", "invocations": 2}
    assert training_span(progress[:2])["invocations"] == 1 and training_span([]) == {}
    data = results()
    assert "from 2026" not in render_section(data, None)  # results before 2026-11-28 have no span
    data["run"]["trained"] = span
    assert ("(30 training episodes, 2 min, from 2026-11-27 17:20 UTC to 2026-11-28 18:20 UTC in 2 invocations "
            "(resumed))") in render_section(data, None)


def test_a_policy_says_what_it_chose_on_the_held_out_worlds() -> None:
    data = results()
    assert "Its decisions on these worlds" not in render_section(data, None)  # scored before 2026-11-28
    data["run"]["policy"]["actions"] = {"do": 0.05, "plan": 0.9, "skill:diamond_macro_shelter": 0.05}
    assert ("(exact McNemar test, two-sided p = 1.00; a difference this size is within chance). Its decisions on "
            "these worlds: the plan 90%, do 5%, shelter 5%.") in render_section(data, None)
    assert "Untrained, the policy" not in render_section(data, None)  # no plan prior: nothing to compare with
    data["run"]["plan_prior"] = 0.8
    assert ("Untrained, the policy chose the plan with probability 80% and each of the other 2 actions with 10% "
            "(`RLConfig.plan_prior`)") in render_section(data, None)


def test_a_run_with_more_gradient_steps_per_batch_says_so() -> None:
    data = results()
    assert "gradient steps per batch" not in render_section(data, None)  # one step per batch: not said
    data["run"]["updates"] = {"epochs": 4, "minibatches": 4}
    assert ("reward stage +1, death -1, 4 passes over each batch in 4 minibatches (16 gradient steps per batch, "
            "not one; `RLConfig.num_epochs`, `num_minibatches`), episodes of up to 10,000 "
            "frames") in render_section(data, None)


def test_a_resumed_job_keeps_the_updates_it_began_with(tmp_path) -> None:
    import json

    from benchmarks.crafter.diamond import job_updates

    assert job_updates(tmp_path, (0, 0)) == (0, 0)  # a new job: the learner's defaults
    (tmp_path / "config.json").write_text(json.dumps({"config": {"num_epochs": 4, "num_minibatches": 2}}))
    assert job_updates(tmp_path, (0, 0)) == (0, 0)  # no progress yet: nothing was trained with them
    (tmp_path / "progress.jsonl").write_text(json.dumps({"env_frames": 1000}) + "\n")
    assert job_updates(tmp_path, (0, 0)) == (4, 2)
    assert job_updates(tmp_path, (1, 1)) == (1, 1)  # asked for: as asked
