"""The critic's judgement: deterministic checks first, then (optionally) an LLM's diagnosis.

The numbers of a verdict (success rate, success) always come from :func:`deterministic_checks`
(``checks.py``); an LLM only writes the diagnosis and suggestion, and picks the target where the checks leave
the choice open. When the LLM is off or fails, the checks' own diagnosis and suggestion are used. The LLM's
prompt is built in ``prompt.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, Field

from rlgpt.errors import RlgptError
from rlgpt.llm.client import CallRecord
from rlgpt.prompts import CompletesJSON, copies_template, shorten
from rlgpt.v1 import critic_pb2
from services.critic import prompt
from services.critic.checks import Findings, deterministic_checks
from services.critic.settings import CriticSettings
from services.critic.texts import MAX_TEXT

__all__ = ["DECISIONS", "TARGET_NAMES", "CriticAnswer", "Findings", "Judge", "deterministic_checks"]

log = logging.getLogger(__name__)

DECISIONS = ("code", "rl", "")
TARGET_NAMES = {critic_pb2.TARGET_UNSPECIFIED: "none", critic_pb2.TARGET_FAST: "fast",
                critic_pb2.TARGET_SLOW: "slow", critic_pb2.TARGET_KEEP: "keep"}
T = TypeVar("T", bound=BaseModel)
_TARGETS = {"fast": critic_pb2.TARGET_FAST, "slow": critic_pb2.TARGET_SLOW, "keep": critic_pb2.TARGET_KEEP}


def _clip(value: Any) -> Any:
    # Over-long prose is shortened at a sentence end rather than rejected: a repair round trip costs more.
    return shorten(value, MAX_TEXT) if isinstance(value, str) else value


class CriticAnswer(BaseModel):
    """The LLM's verdict; ``success`` is advisory (the measured rate decides)."""

    success: bool = Field(description="whether the attempt solves the sub-task")
    diagnosis: Annotated[str, BeforeValidator(_clip), Field(max_length=MAX_TEXT,
                                                            description="what went wrong or right")]
    suggestion: Annotated[str, BeforeValidator(_clip), Field(max_length=MAX_TEXT,
                                                             description="the one change to make next")]
    target: Literal["keep", "fast", "slow"] = Field(
        description="keep: the sub-task passed, keep it; fast: revise code/config; slow: revise the plan")


def ask(llm: CompletesJSON, agent: str, messages: list[dict[str, Any]], schema: type[T], template: Path, about: str,
        notes: list[str], copied: str = "the prompt's example") -> tuple[T | None, CallRecord | None]:
    """The LLM's answer and the record of its call. None, with a finding in ``notes``, when the call failed
    (``llm_unavailable``; the failed call's record is still returned: a replay must meet it) or when the answer's
    diagnosis or suggestion is a text of the prompt's ``template`` word for word (``llm_copied_example``)."""
    try:
        answer, record = llm.complete(agent, messages, schema)
    except RlgptError as exc:  # LLMError, StructuredOutputError, Unavailable, an exhausted replay
        log.warning("critic LLM failed, deterministic verdict for %s: %s", about, exc)
        notes.append(f"llm_unavailable: {type(exc).__name__}: {shorten(str(exc), 300)}")
        return None, getattr(exc, "record", None)
    if copies_template(answer.model_dump(include={"diagnosis", "suggestion"}), template):
        notes.append(f"llm_copied_example: the LLM's diagnosis or suggestion is {copied}, word for word; the "
                     "checks' diagnosis and suggestion are used")
        return None, record
    return answer, record


class Judge:
    """Turns a JudgeRequest into a Verdict: deterministic checks, then the LLM where configured."""

    def __init__(self, settings: CriticSettings, llm: CompletesJSON | None = None):
        self.settings = settings
        self.llm = llm

    def prompt(self, request: critic_pb2.JudgeRequest, findings: Findings) -> str:
        """The LLM prompt's text (see :mod:`services.critic.prompt`)."""
        return prompt.prompt_text(request, findings, self.settings)

    def messages(self, request: critic_pb2.JudgeRequest, findings: Findings) -> list[dict[str, Any]]:
        """The LLM call's messages: the prompt, and the frames where configured."""
        return prompt.messages(request, findings, self.settings)

    def judge(self, request: critic_pb2.JudgeRequest) -> critic_pb2.Verdict:
        """The verdict; an LLM failure degrades to the deterministic one (finding ``llm_unavailable``)."""
        return self.judge_with_record(request)[0]

    def judge_with_record(self, request: critic_pb2.JudgeRequest) -> tuple[critic_pb2.Verdict, CallRecord | None]:
        """The verdict and the record of the LLM call behind it (None when no LLM answered)."""
        record: CallRecord | None = None
        findings = deterministic_checks(request, self.settings)
        verdict = critic_pb2.Verdict(success=findings.success, success_rate=findings.success_rate,
                                     diagnosis=findings.diagnosis, suggestion=findings.suggestion,
                                     target=findings.target)
        notes: list[str] = []
        if findings.success and not self.settings.llm_on_pass:
            notes.append("llm_not_asked: the attempt passed (RLGPT_CRITIC_LLM_ON_PASS is off)")
        elif self.llm is not None and self.settings.use_llm:
            # A small model's copy of the example speaks of another sub-task (sand): the fast agent would revise
            # toward it, so the checks' own diagnosis stands.
            answer, record = ask(self.llm, "critic", self.messages(request, findings), CriticAnswer,
                                 prompt.PROMPT_DIR / "critic.txt", request.subtask, notes)
            if answer is not None:
                self._merge(verdict, findings, answer, notes)
        verdict.findings.extend(findings.findings + notes)
        return verdict, record

    def _merge(self, verdict: critic_pb2.Verdict, findings: Findings, answer: CriticAnswer,
               notes: list[str]) -> None:
        verdict.diagnosis = answer.diagnosis.strip() or findings.diagnosis
        verdict.suggestion = answer.suggestion.strip() or findings.suggestion
        if answer.success != findings.success:
            # The measured rate decides; the LLM's opinion is kept for the agents and the record.
            notes.append(f"llm_disagrees: the LLM judged success={answer.success}; measured success rate "
                         f"{findings.success_rate:.2f} vs threshold {self.settings.success_threshold:.2f}")
        llm_target = _TARGETS[answer.target]
        # "keep" only where the measured rate passed; the checks' target stands where their rule is decisive.
        if findings.decisive or llm_target == critic_pb2.TARGET_KEEP:
            if llm_target != findings.target:
                notes.append(f"llm_target_overruled: the LLM chose {answer.target}; the checks' rule says "
                             f"{TARGET_NAMES[findings.target]}")
        else:
            verdict.target = llm_target
