"""Every Prometheus metric of rlgpt, named ``rlgpt_<service>_<what>_<unit>``, and the /metrics server."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge, Histogram, start_http_server

log = logging.getLogger(__name__)

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

# --- every service: gRPC edge --------------------------------------------------------------------
# The label is ``server`` (env, learner, planner, critic), not ``service``: Prometheus attaches its own ``service``
# target label (deploy/k8s/monitoring/prometheus/prometheus.yml) and would rename a scraped one to exported_service.
GRPC_REQUESTS = Counter("rlgpt_grpc_requests_total", "Unary gRPC calls by server, method and status code.",
                        ["server", "method", "code"])
GRPC_SECONDS = Histogram("rlgpt_grpc_request_seconds", "Unary gRPC call latency.", ["server", "method"],
                         buckets=_LATENCY_BUCKETS)
GRPC_STREAMS_REFUSED = Counter("rlgpt_grpc_streams_refused_total", "Streaming calls refused with RESOURCE_EXHAUSTED "
                               "because their service served its max_streams streams already.", ["server"])

# --- env server ----------------------------------------------------------------------------------
ENV_STEPS = Counter("rlgpt_env_steps_total", "Primitive env frames stepped (skill frames included).",
                    ["backend"])
ENV_STEP_SECONDS = Histogram("rlgpt_env_step_seconds", "Latency of one batched Step over all envs of a session.",
                             ["backend"], buckets=_LATENCY_BUCKETS)
ENV_SESSIONS_ACTIVE = Gauge("rlgpt_env_sessions_active", "Open env sessions.")
ENV_SESSIONS_EXPIRED = Counter("rlgpt_env_sessions_expired_total", "Sessions closed because they sat idle.")
ENV_EPISODES = Counter("rlgpt_env_episodes_total", "Episodes finished, by end reason.", ["backend", "reason"])
ENV_SKILL_RUNS = Counter("rlgpt_env_skill_runs_total", "Skill executions (macro actions and test episodes) "
                         "by outcome.", ["outcome"])
ENV_GUARD_RUNS = Counter("rlgpt_env_guard_runs_total", "Guards' take-overs by how they ended (returned, "
                         "max_frames, error).", ["outcome"])
ENV_SKILL_ERRORS = Counter("rlgpt_env_skill_errors_total", "Skill errors by kind (exception type, Timeout, "
                           "StepBudgetExceeded, PolicyViolation, ...).", ["kind"])
ENV_SKILL_WORKER_RESTARTS = Counter("rlgpt_env_skill_worker_restarts_total",
                                    "Sandbox worker processes killed and replaced.")


def start_metrics_server(port: int, host: str = "127.0.0.1") -> int | None:
    """Serves /metrics on ``port`` (0 picks a free one, -1 disables); returns the bound port."""
    if port < 0:
        return None
    httpd, _thread = start_http_server(port, addr=host)
    bound = int(httpd.server_port)
    log.info("metrics on http://%s:%d/metrics", host, bound)
    return bound

# --- learner -------------------------------------------------------------------------------------
# Per-job series are labelled ``job_id``: ``job`` is Prometheus's own target label (a scraped one becomes exported_job).
LEARNER_FPS = Gauge("rlgpt_learner_training_fps", "Training throughput of a job, env frames per second (0 once it "
                    "stopped running).", ["job_id"])
LEARNER_FRAMES = Gauge("rlgpt_learner_env_frames_total", "Env frames a job has consumed (skill frames included).",
                       ["job_id"])
LEARNER_RETURN = Gauge("rlgpt_learner_episode_return", "Mean episode return over a job's recent episodes.",
                       ["job_id"])
LEARNER_SUCCESS = Gauge("rlgpt_learner_success_rate", "Success rate over a job's recent episodes.", ["job_id"])
LEARNER_JOB_RUNNING = Gauge("rlgpt_learner_job_running", "1 while a job is in state RUNNING, 0 once it left it.",
                            ["job_id"])
LEARNER_JOBS = Gauge("rlgpt_learner_jobs", "Jobs known to the learner, by state.", ["state"])
LEARNER_WATCHDOG_KILLS = Counter("rlgpt_learner_watchdog_kills_total", "Jobs killed for making no progress.")

# --- planner -------------------------------------------------------------------------------------
PLANNER_LLM_TOKENS = Counter("rlgpt_planner_llm_tokens_total", "LLM tokens used, by agent and kind.",
                             ["agent", "kind"])
PLANNER_LLM_SECONDS = Histogram("rlgpt_planner_llm_call_seconds", "Latency of one agent call (repairs included; "
                                "failed calls too).",
                                ["agent"], buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
PLANNER_LLM_ERRORS = Counter("rlgpt_planner_llm_errors_total", "Agent calls that ended in an error, by agent and "
                             "kind (exception type: StructuredOutputError, Unavailable, LLMError).",
                             ["agent", "kind"])
PLANNER_RUNS_ACTIVE = Gauge("rlgpt_planner_runs_active", "Runs in progress.")
PLANNER_ITERATIONS = Counter("rlgpt_planner_iterations_total", "Outer iterations finished.")

# --- critic --------------------------------------------------------------------------------------
CRITIC_VERDICTS = Counter("rlgpt_critic_verdicts_total", "Verdicts given, by outcome (success, failure) and target "
                          "(fast, slow, none).", ["outcome", "target"])
CRITIC_JUDGE_SECONDS = Histogram("rlgpt_critic_judge_seconds", "Latency of one Judge (LLM call included).",
                                 buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
