"""The planner's limits on its requests (:mod:`rlgpt.request_limits`): checked before any RPC runs and served by
DescribePlanner."""

from __future__ import annotations

from rlgpt.request_limits import PATH_CHARS, RequestLimits
from services.planner.runs import RUN_ID_CHARS

RUN_ID_FIELDS = ("StartRunRequest.resume_run_id", "WatchRunRequest.run_id", "GetRunRequest.run_id",
                 "StopRunRequest.run_id", "GetRunReportRequest.run_id")
PLANNER_LIMITS = RequestLimits(
    text_fields=frozenset({"TaskSpec.description"}),
    fields={"StartRunRequest.resume_run_dir": PATH_CHARS, **dict.fromkeys(RUN_ID_FIELDS, RUN_ID_CHARS)})
"""Names (task, backend, mode, agents) of at most 128 characters, the task's description of 8,192 and lists of 256
entries (the env server's own defaults, which every task reaches), run ids of 200, a run directory of 4,096."""
