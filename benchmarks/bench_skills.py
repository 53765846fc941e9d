"""`make bench-skills`: the fast agent's code prompt read by a capable model, its skills run on the env server.

The check the design asks for ("give only the rendered prompt to a capable model, let it answer, run the
answer"), made reproducible. For each of 14 Crafter sub-tasks the planner's own FastAgent renders its prompt
from a real env server's Describe; the model's answers are files, so a result can be re-run with no model:

    python -m benchmarks.bench_skills prompts --answers DIR    # writes DIR/<subtask>.a<N>.prompt.txt for
                                                               # every sub-task still missing an answer
    (the model answers each prompt file, nothing else shown to it, into DIR/<subtask>.a<N>.json)
    python -m benchmarks.bench_skills run --answers DIR        # tests every answer (RunSkill), and writes
                                                               # the revision prompts of failed sub-tasks
    python -m benchmarks.bench_skills report --answers DIR --model "NAME"   # table -> docs/BENCHMARKS.md

An answer is only used with the exact prompt it was written for (its hash is checked), so a changed prompt
never scores a stale answer. Start inventories come from the world's rules in Describe: what the
sub-task's achievement uses and holds, plus what placing the things it needs nearby uses.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from benchmarks.common import machine_description, save_results, utc_now, write_section
from benchmarks.skills.report import EPISODES, MAX_ATTEMPTS, META, STEPS, SUBTASKS, TITLE, render_section
from rlgpt import world_rules, worlds
from rlgpt.app.launcher import start_service
from rlgpt.grpc_client import create_channel
from rlgpt.llm.client import CallRecord, StructuredOutputError, validation_text
from rlgpt.v1 import common_pb2, env_pb2, env_pb2_grpc, planner_pb2
from services.planner.agents.answers import SkillCandidate
from services.planner.agents.fast import FastAgent
from services.planner.skill_library import SkillLibrary

log = logging.getLogger("bench_skills")
console = Console(stderr=True)
app = typer.Typer(add_completion=False, help=__doc__)


class MissingAnswer(Exception):
    """No answer file for this prompt yet: the prompt was written for the model to answer."""


def start_items(rules: common_pb2.WorldRules, achievement: str) -> dict[str, int]:
    """What a test of ``achievement`` starts with: its rule's uses and holds, and what placing its nearby needs."""
    rule = world_rules.achievement_rule(rules, achievement)
    if rule is None:
        return {}
    items: dict[str, int] = {}
    for source in (rule.uses, rule.holds):
        for item, count in source.items():
            items[item] = items.get(item, 0) + count
    placeable = {r.item: r for r in rules.place}
    for material in rule.nearby:
        if material in placeable:
            for use in placeable[material].uses:
                items[use.item] = items.get(use.item, 0) + use.count
    return items


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class AnswerFiles:
    """The LLM client interface of the fast agent, answered from files a model wrote for the exact prompt."""

    def __init__(self, directory: Path, subtask: str, attempt: int, write_prompts: bool):
        self.directory, self.subtask, self.attempt, self.write_prompts = directory, subtask, attempt, write_prompts
        self.model = "answer-files"

    def complete(self, agent: str, messages: list[dict[str, str]], schema: type[Any], *, iteration: int = 0,
                 validate: Any = None, seed: int | None = None) -> tuple[Any, CallRecord]:
        prompt = messages[-1]["content"]
        stem = f"{self.subtask}.a{self.attempt}"
        answer_path = self.directory / f"{stem}.json"
        prompt_path = self.directory / f"{stem}.prompt.txt"
        if not answer_path.exists():
            if self.write_prompts:
                prompt_path.write_text(prompt)
            raise MissingAnswer(str(prompt_path))
        doc = json.loads(answer_path.read_text())
        recorded = doc.pop("_prompt_sha256", None)
        if recorded is not None and recorded != _digest(prompt):
            raise MissingAnswer(f"{answer_path} answers an older prompt (hash {recorded}, now {_digest(prompt)}); "
                                "ask the model again")
        record = CallRecord(seq=self.attempt, agent=agent, iteration=iteration, model=self.model, messages=messages,
                            response=json.dumps(doc), parsed=doc, prompt_tokens=0, completion_tokens=0,
                            latency_seconds=0.0, attempts=1)
        try:
            answer = schema.model_validate(doc)
        except ValidationError as exc:
            # A model's answer that breaks the schema is that attempt's failure, with the reason, as in a run.
            record.parsed, record.error = None, validation_text(exc)
            raise StructuredOutputError(f"{agent} agent: the answer does not match {schema.__name__}: "
                                        f"{record.error[:500]}", record) from exc
        return answer, record


def _feedback(candidate: SkillCandidate) -> tuple[str, str]:
    """The revision prompt's inputs from a failed test: the error, and the episodes' trajectories."""
    error = ""
    if candidate.error is not None and candidate.error.type:
        e = candidate.error
        error = f"{e.type} at line {e.line}: {e.message}" + (f" [{e.code_line}]" if e.code_line else "")
    # Failures first (what needs fixing), then one success to contrast, as the critic shows them.
    indexed = list(enumerate(candidate.episodes))
    shown_episodes = ([x for x in indexed if not x[1].success][:2] + [x for x in indexed if x[1].success][:1])[:2]
    episodes = "\n\n".join(f"episode {i}: {'success' if ep.success else 'failure'}, {ep.steps} frames\n{ep.text}"
                           for i, ep in shown_episodes)
    rate = max(0.0, candidate.success_rate)
    return error, f"Measured success {rate:.0%} over {len(candidate.episodes)} test episodes.\n{episodes}"


def _agent(env: env_pb2_grpc.EnvServiceStub, describe: env_pb2.DescribeResponse, llm: AnswerFiles,
           library: Path) -> FastAgent:
    return FastAgent(llm, env, describe, SkillLibrary(library), test_episodes=EPISODES, test_steps=STEPS,
                     seed=worlds.SKILL_BENCH_SEED)


def _subtask(name: str) -> planner_pb2.SubTask:
    return planner_pb2.SubTask(name=name, description=name.replace("_", " "),
                               success=[common_pb2.Condition(achievement=name)])


def _walk(answers: Path, write_prompts: bool, test: bool, only: str = "") -> None:
    answers.mkdir(parents=True, exist_ok=True)
    env_proc = start_service("env", answers / "logs")
    try:
        env = env_pb2_grpc.EnvServiceStub(create_channel(env_proc.target, default_timeout=900,
                                                         wait_ready_seconds=30))
        describe = env.Describe(env_pb2.DescribeRequest())
        for name in [n for n in SUBTASKS if not only or n in only.split(",")]:
            start = [common_pb2.ItemCount(item=k, count=v) for k, v in start_items(describe.rules, name).items()]
            previous_code, error, feedback = "", "", ""
            # Each sub-task is checked on its own: its library starts empty, so its prompts never depend on
            # how other sub-tasks went (and an answer stays valid for its prompt).
            library = answers / "logs" / f"library-{name}.json"
            library.unlink(missing_ok=True)
            for attempt in range(1, MAX_ATTEMPTS + 1):
                result_path = answers / f"{name}.a{attempt}.result.json"
                llm = AnswerFiles(answers, name, attempt, write_prompts)
                agent = _agent(env, describe, llm, library)
                try:
                    [candidate] = agent.write_skill(_subtask(name), previous_code=previous_code, error=error,
                                                    feedback=feedback, start_inventory=start)
                except MissingAnswer as missing:
                    console.print(f"{name} attempt {attempt}: waiting for an answer ({missing})")
                    break
                rate = max(0.0, candidate.success_rate)
                if test or not result_path.exists():
                    result_path.write_text(json.dumps({
                        "subtask": name, "attempt": attempt, "success_rate": rate,
                        "error": _feedback(candidate)[0], "start_inventory": {i.item: i.count for i in start},
                        "episodes": [{"success": e.success, "steps": e.steps, "end": e.end_reason}
                                     for e in candidate.episodes]}, indent=1))
                console.print(f"{name} attempt {attempt}: success {rate:.0%}")
                if rate >= 1.0:
                    break
                previous_code = candidate.answer.code if candidate.answer else ""
                error, feedback = _feedback(candidate)
    finally:
        env_proc.stop()


ONLY = typer.Option(help="Comma-separated sub-tasks (default: all 14).")


@app.command()
def prompts(answers: Annotated[Path, typer.Option(help="Directory of prompts and answers.")],
            only: Annotated[str, ONLY] = "") -> None:
    """Writes the prompt of every sub-task whose next answer is missing (runs the answers that exist)."""
    _walk(answers, write_prompts=True, test=False, only=only)


@app.command()
def run(answers: Annotated[Path, typer.Option(help="Directory of prompts and answers.")],
        only: Annotated[str, ONLY] = "") -> None:
    """Tests every recorded answer again on the env server; writes revision prompts where one is missing."""
    _walk(answers, write_prompts=True, test=True, only=only)


@app.command()
def stamp(answers: Annotated[Path, typer.Option(help="Directory of prompts and answers.")]) -> None:
    """Marks each new answer with the hash of the prompt file it answers (run right after the model wrote it)."""
    for path in sorted(answers.glob("*.a[0-9].json")):
        doc = json.loads(path.read_text())
        prompt = path.with_name(path.name.removesuffix(".json") + ".prompt.txt")
        if "_prompt_sha256" not in doc and prompt.exists():
            doc["_prompt_sha256"] = _digest(prompt.read_text())
            path.write_text(json.dumps(doc, indent=1))
            console.print(f"stamped {path.name}")


@app.command()
def report(
    answers: Annotated[Path, typer.Option(help="Directory of prompts, answers and results.")],
    model: Annotated[str, typer.Option(help="The model that wrote the answers, as it should be named.")],
    output: Annotated[Path, typer.Option(help="Markdown file to update.")] = Path("docs/BENCHMARKS.md"),
) -> None:
    """Records who answered, when and where (``report.json`` beside the answers), then writes the first-attempt
    and best success per sub-task into docs/BENCHMARKS.md from the answers' result files alone."""
    save_results(answers / META, {"model": model, "date_utc": utc_now(), "machine": machine_description()})
    section = render_section(answers)
    write_section(output, TITLE, section)
    console.print(section)

if __name__ == "__main__":
    app()
