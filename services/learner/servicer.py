"""``rlgpt.v1.LearnerService``: validated RL configs in, training jobs and evaluations out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import grpc

from rlgpt.env_client import list_all_skills
from rlgpt.env_contract import is_macro
from rlgpt.errors import InvalidArgument, Unavailable, grpc_errors, shown
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import env_pb2, env_pb2_grpc, learner_pb2, learner_pb2_grpc
from services.learner.chain import check_chain, evaluate_chain
from services.learner.env_servers import prepare_env_servers, training_targets
from services.learner.evaluate import check_animate, evaluate
from services.learner.jobs import JobRunner
from services.learner.limits import LEARNER_LIMITS
from services.learner.manager import JobManager
from services.learner.plan_links import check_link_fits, pin_links, pinned_links, resolve_links, session_config
from services.learner.policy import check_resumable
from services.learner.rl_config import EnvVocabulary, check_device, validate_rl_config
from services.learner.settings import LearnerSettings
from services.learner.sf_env import session_request
from services.learner.spaces import job_actions
from services.learner.warm_start import start_checkpoint, write_start_checkpoint

log = logging.getLogger(__name__)
SERVICE_NAME = learner_pb2.DESCRIPTOR.services_by_name["LearnerService"].full_name
MAX_EVAL_EPISODES = 256
MAX_EVAL_FRAMES_PER_EPISODE = 8
"""Most frames Evaluate returns per episode (EvaluateRequest.frames_per_episode)."""


def pure_rl_baseline(config: learner_pb2.RLConfig) -> learner_pb2.RLConfig:
    """The same job without coded skills: primitives only (the ablation's pure-RL arm)."""
    baseline = learner_pb2.RLConfig()
    baseline.CopyFrom(config)
    del baseline.skills[:]
    baseline.skill_max_steps = 1
    baseline.name = f"{config.name}__pure_rl" if config.name else "pure_rl"
    return baseline


def is_file(path: Path) -> bool:
    """Whether ``path`` is a file; False also for a path the OS will not look up (a name too long)."""
    try:
        return path.is_file()
    except OSError:
        return False


def vector_length(session: env_pb2.CreateSessionResponse) -> int:
    """The length of a session's observation vector (what a policy's first layer takes)."""
    return next((f.shape[0] for f in session.observation if f.name == "vector"), 0)


def policy_actions(config: learner_pb2.RLConfig, session: env_pb2.CreateSessionResponse) -> int:
    """How many actions ``config``'s policy has in a session of it (which may hold more: its plan's policies')."""
    return len(job_actions(config, [name for name in session.actions if not is_macro(name)]))


class LearnerServicer(learner_pb2_grpc.LearnerServiceServicer):
    """Trains policies with Sample Factory APPO on env-server sessions."""

    def __init__(self, settings: LearnerSettings, runners: dict[str, JobRunner] | None = None):
        self.settings = settings
        self.jobs = JobManager(settings, runners)
        self.request_limits = LEARNER_LIMITS
        self._env_channel = create_channel(settings.env_server, default_timeout=30)
        self._env = env_pb2_grpc.EnvServiceStub(self._env_channel)

    def close(self) -> None:
        self.jobs.close()
        self._env_channel.close()

    def _vocabulary(self, backend: str) -> EnvVocabulary:
        try:
            describe = self._env.Describe(env_pb2.DescribeRequest(backend=backend), timeout=30)
            skills = list_all_skills(self._env, backend, timeout=30)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgument(f"backend {shown(backend)}: {exc.details()}") from None
            raise Unavailable(f"env server at {self.settings.env_server} did not answer ({exc.code().name}: "
                              f"{exc.details()}); start it or set RLGPT_LEARNER_ENV_SERVER") from None
        return EnvVocabulary.from_env_server(describe, skills)

    def _env_accepts(self, config: learner_pb2.RLConfig) -> env_pb2.CreateSessionResponse:
        """Opens and closes one real session with the config: the env server is the one judge of what it accepts.
        The session as created (its observation fields and actions)."""
        try:
            session = self._env.CreateSession(session_request(config, int(config.seed), client="learner:validate"),
                                              timeout=60)
            self._env.CloseSession(env_pb2.CloseSessionRequest(session_id=session.session_id), timeout=30)
            return session
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND):
                raise InvalidArgument(f"invalid RL config: the env server refused it: {exc.details()}") from None
            raise Unavailable(f"env server at {self.settings.env_server} did not answer ({exc.code().name}: "
                              f"{exc.details()})") from None

    def _targets(self, config: learner_pb2.RLConfig) -> list[str]:
        """The env servers of a job, checked and holding its skills (FAILED_PRECONDITION otherwise)."""
        targets = training_targets(self.settings.env_server, self.settings.env_servers)
        prepare_env_servers(targets, self.settings.env_server, self._env, config)
        return targets

    def _job_extra(self, targets: list[str]) -> dict[str, Any]:
        return {"env_server": self.settings.env_server, "env_servers": targets, "device": self.settings.device,
                "progress_interval": self.settings.progress_interval_seconds,
                "learner_timeout": self.settings.heartbeat_timeout_seconds,
                "stop_grace": self.settings.stop_grace_seconds}

    @grpc_errors
    def StartTraining(self, request: learner_pb2.StartTrainingRequest,
                      context: grpc.ServicerContext) -> learner_pb2.StartTrainingResponse:
        if request.resume_job_id:
            existing = self.jobs.get(request.resume_job_id)
            served = session_config(existing.config, pinned_links(existing.job_dir, existing.config))
            targets = self._targets(served)
            session = self._env_accepts(served)  # what the env serves the job now
            vector, actions = vector_length(session), policy_actions(existing.config, session)
            record = self.jobs.resume(request.resume_job_id, self._job_extra(targets),
                                      check=lambda job_dir: check_resumable(job_dir, vector, actions))
            return learner_pb2.StartTrainingResponse(job_id=record.job_id)
        vocabulary = self._vocabulary(request.config.backend)
        config = validate_rl_config(request.config, vocabulary, self.settings)
        check_device(config, self.settings)
        links = resolve_links(config, self.jobs.get)  # the plan's policy steps: their jobs and checkpoints
        served = session_config(config, links)
        session = self._env_accepts(served)
        check_link_fits(links, vector_length(session), vocabulary.actions)
        prepares: list[Callable[[Path], Any]] = [partial(pin_links, links)]
        if config.init_from_job:  # the weights it starts from: checked now, copied into its directory at the start
            start = start_checkpoint(self.jobs.get(config.init_from_job), config, vocabulary.actions,
                                     vocabulary.vector_labels, vector_length(session), policy_actions(config, session))
            prepares.append(partial(write_start_checkpoint, start))
        record = self.jobs.start(config, self._job_extra(self._targets(served)),
                                 lambda job_dir: [prepare(job_dir) for prepare in prepares])
        return learner_pb2.StartTrainingResponse(job_id=record.job_id)

    @grpc_errors
    def WatchJob(self, request: learner_pb2.WatchJobRequest,
                 context: grpc.ServicerContext) -> Iterator[learner_pb2.JobProgress]:
        self.jobs.get(request.job_id)  # NOT_FOUND before the stream starts
        yield from self.jobs.watch(request.job_id, context.is_active)

    @grpc_errors
    def StopJob(self, request: learner_pb2.StopJobRequest, context: grpc.ServicerContext) -> learner_pb2.JobProgress:
        return self.jobs.progress(self.jobs.stop(request.job_id))

    @grpc_errors
    def Evaluate(self, request: learner_pb2.EvaluateRequest,
                 context: grpc.ServicerContext) -> learner_pb2.EvaluateResponse:
        if not 1 <= request.episodes <= MAX_EVAL_EPISODES:
            raise InvalidArgument(f"episodes={request.episodes} must be in 1..{MAX_EVAL_EPISODES}")
        if not 0 <= request.frames_per_episode <= MAX_EVAL_FRAMES_PER_EPISODE:
            raise InvalidArgument(f"frames_per_episode={request.frames_per_episode} must be in "
                                  f"0..{MAX_EVAL_FRAMES_PER_EPISODE}")
        if request.animate:  # the env server's limit, asked only when GIFs are
            check_animate(request.animate, self._vocabulary("").max_animations)
        if request.plan_alone and (request.chain or request.greedy):
            raise InvalidArgument("plan_alone evaluates one job's kept plan with no policy acting: set neither "
                                  "chain nor greedy with it")
        if request.guards and not request.chain:
            raise InvalidArgument("guards go with a chain: a job's own evaluation uses its config's guards "
                                  "(RLConfig.guards)")
        if request.chain:
            check_chain(request)
            job_dirs = {link.job_id: self.jobs.get(link.job_id).job_dir for link in request.chain if link.job_id}
            return evaluate_chain(request, job_dirs, self.settings.env_server)
        if request.episode_length < 0:
            raise InvalidArgument(f"episode_length={request.episode_length} must be >= 0 (0: the job's own)")
        if bool(request.job_id) == bool(request.checkpoint):
            raise InvalidArgument("set exactly one of job_id and checkpoint")
        if request.job_id:
            job_dir, checkpoint = self.jobs.get(request.job_id).job_dir, None
        else:
            checkpoint = Path(request.checkpoint).resolve()
            if self.jobs.root not in checkpoint.parents or not is_file(checkpoint):
                raise InvalidArgument(f"checkpoint {shown(request.checkpoint)} is not a file under {self.jobs.root}")
            job_dir = self.jobs.root / checkpoint.relative_to(self.jobs.root).parts[0]
        task = request.task if request.HasField("task") else None
        return evaluate(job_dir, self.settings.env_server, request.episodes, request.seed, checkpoint, task=task,
                        frames_per_episode=request.frames_per_episode, episode_length=request.episode_length,
                        greedy=request.greedy, plan_alone=request.plan_alone, animate=request.animate)

    @grpc_errors
    def DescribeLearner(self, request: learner_pb2.DescribeLearnerRequest,
                        context: grpc.ServicerContext) -> learner_pb2.DescribeLearnerResponse:
        return learner_pb2.DescribeLearnerResponse(
            requests=self.request_limits.to_proto(), max_eval_episodes=MAX_EVAL_EPISODES,
            max_eval_frames_per_episode=MAX_EVAL_FRAMES_PER_EPISODE, max_env_frames=self.settings.max_env_frames)

    @grpc_errors
    def ListJobs(self, request: learner_pb2.ListJobsRequest,
                 context: grpc.ServicerContext) -> learner_pb2.ListJobsResponse:
        return learner_pb2.ListJobsResponse(jobs=[
            learner_pb2.JobInfo(job_id=j.job_id, config=j.config, progress=self.jobs.progress(j),
                                job_dir=str(j.job_dir))
            for j in self.jobs.all()])
