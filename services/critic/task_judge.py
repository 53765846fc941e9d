"""The critic's judgement of a whole task's evaluation (``JudgeTask``): the checks first, then (optionally) an
LLM's diagnosis.

The numbers (success rate, success, death causes) always come from :func:`~services.critic.task_checks.task_checks`;
the LLM (agent ``critic_task``) writes the diagnosis and suggestion and may choose the target and the link where the
checks' rule is not decisive:

- "keep" is taken only where the task reached its target (then the rule is decisive anyway);
- "slow" keeps the link it named, else the weakest (its skill or training is revised beside the re-plan);
- "fast" takes the LLM's link where it names one of the chain's links, else the weakest link; with neither the
  rule's target stands.

An LLM ``subtask`` that is not a link of the chain is ignored, with the finding ``llm_subtask_ignored``. As with
the :class:`~services.critic.judge.Judge` (:func:`~services.critic.judge.ask`), a failed LLM call degrades to the
deterministic verdict (finding ``llm_unavailable``), and an answer that copies a text of the prompt is not taken
(``llm_copied_example``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from rlgpt.llm.client import CallRecord
from rlgpt.prompts import CompletesJSON, shorten
from rlgpt.v1 import critic_pb2
from services.critic import task_prompt
from services.critic.judge import TARGET_NAMES, ask
from services.critic.prompt import PROMPT_DIR
from services.critic.settings import CriticSettings
from services.critic.task_checks import MAX_TASK_TEXT, TaskFindings, task_checks
from services.critic.texts import MAX_TEXT

AGENT = "critic_task"
"""The LLM agent name of a whole-task verdict (its own queue in a replay, its own line in the token ledger)."""
_TARGETS = {"fast": critic_pb2.TARGET_FAST, "slow": critic_pb2.TARGET_SLOW, "keep": critic_pb2.TARGET_KEEP}


def _clip(limit: int) -> BeforeValidator:
    # Over-long prose is shortened at a sentence end rather than rejected: a repair round trip costs more.
    return BeforeValidator(lambda value: shorten(value, limit) if isinstance(value, str) else value)


class TaskVerdictAnswer(BaseModel):
    """The LLM's verdict on the whole task; the measured numbers are not its to change."""

    diagnosis: Annotated[str, _clip(MAX_TASK_TEXT), Field(
        max_length=MAX_TASK_TEXT, description="where and why the episodes fail, with the links and trajectories")]
    suggestion: Annotated[str, _clip(MAX_TEXT), Field(max_length=MAX_TEXT, description="the one change to make next")]
    target: Literal["keep", "fast", "slow"] = Field(
        description="keep: the task reached its target; fast: revise one link's sub-task; slow: re-plan")
    subtask: str = Field(default="", description="with fast: the sub-task of the link to revise, as the list of "
                                                 "links names it")


class TaskJudge:
    """Turns a JudgeTaskRequest into a Verdict: the checks, then the LLM where configured."""

    def __init__(self, settings: CriticSettings, llm: CompletesJSON | None = None):
        self.settings = settings
        self.llm = llm

    def messages(self, request: critic_pb2.JudgeTaskRequest, findings: TaskFindings) -> list[dict[str, Any]]:
        """The LLM call's messages (see :mod:`services.critic.task_prompt`)."""
        return task_prompt.messages(request, findings)

    def judge(self, request: critic_pb2.JudgeTaskRequest) -> critic_pb2.Verdict:
        """The verdict; an LLM failure degrades to the deterministic one."""
        return self.judge_with_record(request)[0]

    def judge_with_record(self, request: critic_pb2.JudgeTaskRequest
                          ) -> tuple[critic_pb2.Verdict, CallRecord | None]:
        """The verdict and the record of the LLM call behind it (None when no LLM answered)."""
        record: CallRecord | None = None
        findings = task_checks(request, self.settings)
        verdict = critic_pb2.Verdict(success=findings.success, success_rate=findings.success_rate,
                                     diagnosis=findings.diagnosis, suggestion=findings.suggestion,
                                     target=findings.target, subtask=findings.subtask)
        verdict.death_causes.update(findings.death_causes)
        notes: list[str] = []
        if self.llm is not None and self.settings.use_llm:
            answer, record = ask(self.llm, AGENT, self.messages(request, findings), TaskVerdictAnswer,
                                 PROMPT_DIR / "critic_task.txt", f"the task {request.task}", notes,
                                 copied="a text of the prompt")
            if answer is not None:
                merge(verdict, findings, answer, [link.subtask for link in request.links], notes)
        verdict.findings.extend(findings.findings + notes)
        return verdict, record


def merge(verdict: critic_pb2.Verdict, findings: TaskFindings, answer: TaskVerdictAnswer, links: list[str],
          notes: list[str]) -> None:
    """The LLM's texts, and its target and link where the rules of the module docstring allow them."""
    verdict.diagnosis = answer.diagnosis.strip() or findings.diagnosis
    verdict.suggestion = answer.suggestion.strip() or findings.suggestion
    named = answer.subtask.strip()
    if named and named not in links:
        notes.append(f"llm_subtask_ignored: {named[:40]!r} is not a link of the chain")
        named = ""
    wanted = _TARGETS[answer.target]
    if findings.decisive or wanted == critic_pb2.TARGET_KEEP:
        if wanted != findings.target:
            notes.append(f"llm_target_overruled: the LLM chose {answer.target}; the checks' rule says "
                         f"{TARGET_NAMES[findings.target]}")
        return
    if wanted == critic_pb2.TARGET_SLOW:
        verdict.target, verdict.subtask = critic_pb2.TARGET_SLOW, named or findings.weakest
        return
    link = named or findings.weakest
    if not link:
        notes.append("llm_target_overruled: the LLM chose fast but named no link of the chain, and no link loses "
                     f"episodes; the checks' rule says {TARGET_NAMES[findings.target]}")
        return
    verdict.target, verdict.subtask = critic_pb2.TARGET_FAST, link
