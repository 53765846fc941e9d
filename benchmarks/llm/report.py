"""bench-llm's section of BENCHMARKS.md, built only from the saved results (``docs/bench-raw/llm/results.json``).

Results: ``{"date_utc", "machine", "episodes", "steps", "start_inventory", "dead_loop_repeats", "subtasks",
"models": [...]}`` (start_inventory "chain": tests started from what the rules' chain before the sub-task leaves;
absent in older results, which started from the sub-task's own needs); a model's dict as
:func:`benchmarks.bench_llm.measure_model` returns it. Results saved before the dead-loop count (a bare list of
models, no dead-loop fields) still render, with "-" where nothing was measured.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from benchmarks.common import fmt_pct, joined, markdown_table

TITLE = "## Embedded LLMs on the agents' prompts (make bench-llm)"


def normalized(results: dict[str, Any] | list[dict[str, Any]]) -> dict[str, Any]:
    """Old results (a list of models) as the current dict, unknown fields left out."""
    return {"models": results} if isinstance(results, list) else results


def loop_cell(model: dict[str, Any]) -> str:
    """'3/24 (12%)'; '0/0' when no skill ran a test episode; '-' when not measured (old results)."""
    if "test_episodes" not in model:
        return "-"
    n, k = model["test_episodes"], model["dead_loop_episodes"]
    return f"{k}/{n} ({fmt_pct(k / n)})" if n else "0/0"


def loops_of(model: dict[str, Any]) -> list[dict[str, Any]]:
    """The repeated-action loops found in the model's test episodes, each with its sub-task."""
    return [{**loop, "subtask": row["subtask"]} for row in model.get("rows", []) for loop in row.get("loops", [])]


def model_sentence(model: dict[str, Any]) -> str:
    """What the dead-loop count of one model says, from its numbers only."""
    name = f"`{model['model']}`"
    n, k = model["test_episodes"], model["dead_loop_episodes"]
    if n == 0:
        return (f"{name}: no skill passed the sandbox, so none ran a test episode and there is no dead-loop rate to "
                "measure.")
    if k == 0:
        return f"{name}: none of its {n} test episodes was a dead loop."
    text = f"{name}: {k} of {n} test episodes ({fmt_pct(k / n)}) were dead loops"
    loops = loops_of(model)
    if loops:
        actions = Counter(loop["action"] for loop in loops)
        longest = max(loops, key=lambda loop: loop["count"])
        common = ", ".join(f"`{a}` ({c} episode{'s' if c != 1 else ''})" for a, c in actions.most_common(3))
        text += (f"; repeated actions: {common}; longest: `{longest['action']}` x{longest['count']} in "
                 f"{longest['subtask']}")
    idle = model.get("dead_loop_idle_episodes", 0)
    if idle:
        text += f"; {idle} only ran out of time with nothing unlocked"
    return text + "."


def comparison_sentence(models: list[dict[str, Any]]) -> str:
    """Which model had the fewest dead loops among those whose skills ran episodes (ties said as ties)."""
    measured = [m for m in models if m.get("test_episodes")]
    if len(measured) < 2:
        return ""
    rates = {m["model"]: m["dead_loop_episodes"] / m["test_episodes"] for m in measured}
    low = min(rates.values())
    leaders = [f"`{name}`" for name, rate in rates.items() if rate == low]
    if len(leaders) == len(measured):
        return f"The models whose skills ran episodes tied at a dead-loop rate of {fmt_pct(low)}."
    return (f"Lowest dead-loop rate: {joined(leaders)} ({fmt_pct(low)})" +
            (" (a tie)" if len(leaders) > 1 else "") + ".")


def dead_loop_text(results: dict[str, Any]) -> list[str]:
    models = [m for m in results["models"] if "test_episodes" in m]
    if not models:
        return []
    repeats = results.get("dead_loop_repeats")
    lines = [f"Dead-loop episodes: the skill test episodes the critic's own check (`services/critic/checks.py` "
             f"`dead_loops`, run on each episode alone) flags: one action repeated {repeats or 'N'} times or more "
             "with no inventory change (the critic's `dead_loop_repeats`), or the time limit reached with nothing "
             "unlocked. Only skills that passed the sandbox run test episodes. "
             + " ".join(model_sentence(m) for m in models)]
    comparison = comparison_sentence(models)
    if comparison:
        lines[0] += " " + comparison
    return [*lines, ""]


def rate_cell(model: dict[str, Any], key: str) -> str:
    """A rate the model's results hold; '-' for results saved before it was measured."""
    return fmt_pct(model[key]) if key in model else "-"


def passes_cell(model: dict[str, Any]) -> str:
    """'9/12 (75%)': sub-tasks whose skill passed its test."""
    rows = [row for row in model.get("rows", []) if "skill_passes" in row]
    if not rows:
        return fmt_pct(model["skill_passes_rate"])
    return f"{sum(bool(row['skill_passes']) for row in rows)}/{len(rows)} ({fmt_pct(model['skill_passes_rate'])})"


def copy_text(models: list[dict[str, Any]]) -> list[str]:
    """What "copies the prompt" means, said once when it was measured."""
    if not any("plan_copy_rate" in m for m in models):
        return []
    return ["An answer copies the prompt when one of its texts of 12 characters or more (a name, a description, a "
            "rationale, code) appears word for word in its prompt template (the examples and the answer's form). "
            "\"Plan follows the rules\": the plan has no violation by the planner's check against the served rules "
            "(a skipped or misordered prerequisite, too few items, a side quest).", ""]


def render(results: dict[str, Any] | list[dict[str, Any]]) -> str:
    results = normalized(results)
    models = results["models"]
    subtasks = results.get("subtasks")
    episodes, steps = results.get("episodes"), results.get("steps")
    measured = (f"Measured {results['date_utc']} on {results['machine']}; " if "date_utc" in results else
                "Measured (date and machine not recorded); ")
    setup = ("llama-cpp-python server on loopback, 2 threads, answers constrained by the JSON schema "
             "(json_object + schema)")
    if subtasks:
        setup += f"; {len(subtasks)} Crafter sub-tasks ({', '.join(subtasks)})"
    if episodes and steps:
        start = ("what the rules' chain of sub-tasks before it leaves in the inventory, as the planner tests a "
                 "sub-task of a plan" if results.get("start_inventory") == "chain" else "the items the sub-task needs")
        setup += f"; each skill tested on {episodes} episodes of {steps} frames, starting with {start}"
    rows = [(f"{m['model']} ({m['package']})", m.get("skill_format", "python"), fmt_pct(m["valid_plan_rate"]),
             rate_cell(m, "plan_rules_rate"), rate_cell(m, "plan_copy_rate"), fmt_pct(m["skill_json_rate"]),
             fmt_pct(m["skill_compiles_rate"]), passes_cell(m), rate_cell(m, "skill_copy_rate"), loop_cell(m),
             f"{m['completion_tokens_per_second']:.1f}", f"{m['slow_seconds_per_call']:.1f}",
             f"{m['fast_seconds_per_call']:.1f}") for m in models]
    lines = [TITLE, "", measured + setup + ".", "",
             *markdown_table(("model", "skill format", "valid plan", "plan follows the rules", "plan copies the "
                              "prompt", "skill JSON valid", "skill passes sandbox", "skill passes its test",
                              "skill copies the prompt", "dead-loop episodes", "completion tokens/s", "s per slow call",
                              "s per fast call"), rows), "",
             *copy_text(models), *dead_loop_text(results)]
    for m in models:
        errors = [f"{row['subtask']}: {row['skill_error']}" for row in m["rows"] if row.get("skill_error")][:4]
        if errors:
            lines += [f"Typical skill errors of {m['model']}: " + "; ".join(e.replace("|", "/") for e in errors), ""]
    return "\n".join(lines)
