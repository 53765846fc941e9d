"""Messages the env server answers with, built from what its sessions and registry hold (episode summaries,
skill errors, skill infos)."""

from __future__ import annotations

from typing import Any

from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.skills.executor import SkillRecord


def skill_error_proto(error: dict[str, Any] | None) -> common_pb2.SkillError | None:
    if not error:
        return None
    return common_pb2.SkillError(type=str(error.get("type", "")), message=str(error.get("message", "")),
                                 line=int(error.get("line", 0) or 0), code_line=str(error.get("code_line", "")))


def episode_summary_proto(e: dict[str, Any]) -> common_pb2.EpisodeSummary:
    return common_pb2.EpisodeSummary(
        success=e["success"], steps=e["steps"], episode_return=e["episode_return"], error=skill_error_proto(e["error"]),
        achievements=e["achievements"], death_cause=e["death_cause"], text=e["text"], end_reason=e["end_reason"],
        final_inventory=[common_pb2.ItemCount(item=k, count=v) for k, v in e["final_inventory"].items()],
        animation=e.get("animation", b""), stages_done=e.get("stages_done", []),
        stage_frames=e.get("stage_frames", []))


def skill_info(record: SkillRecord, include_code: bool = True) -> env_pb2.SkillInfo:
    return env_pb2.SkillInfo(name=record.name, description=record.description, backend=record.backend,
                             code=record.code if include_code else "", version=record.version)
