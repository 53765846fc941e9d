#!/usr/bin/env bash
# Smoke test of the images: the four services and the LLM server as containers in one podman pod, gRPC health of
# each, a short `rlgpt run` from the host against the planner container, a report, a graceful stop of every
# container (SIGTERM, exit code 0), and everything removed on exit (trap). Prints the timings.
#
#   deploy/scripts/smoke-images.sh                       # after make images-local
#   SMOKE_TASK=collect_sapling SMOKE_RUN_ARGS="--outer 1 --inner 1" deploy/scripts/smoke-images.sh
#
# Why one pod: the containers share one network namespace, so the planner reaches the env server, learner, critic
# and LLM at 127.0.0.1:<their container port>, exactly as the embedded default does and as a Kubernetes pod
# would. This podman (4.3, CNI backend) has no DNS plugin on its networks, so containers on a podman network
# could not find each other by name without one more package. The pod publishes every port on loopback only.
#
# The planner writes the run directory; the host's `rlgpt run` reads it to write the report, so the host
# directory is mounted into the planner container at the same absolute path (owned by uid 10001).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ENGINE=podman
command -v podman >/dev/null || die "smoke-images needs podman (make images-local installs it)"
podman_host_args
POD=${SMOKE_POD:-rlgpt-smoke}
RUNS=${SMOKE_RUNS:-$RLGPT_ROOT/runs/smoke-images}
TASK=${SMOKE_TASK:-collect_wood}
# One outer and one inner iteration, a 2,000-frame training: every service is used, in a few minutes on 2 cores.
RUN_ARGS=${SMOKE_RUN_ARGS:---outer 1 --inner 1 --frames-per-training 2000 --total-frames 4000 --eval-episodes 2}
RUN_TIMEOUT=${SMOKE_RUN_TIMEOUT:-1200}
HEALTH_TIMEOUT=${SMOKE_HEALTH_TIMEOUT:-240}
RLGPT=${RLGPT:-$RLGPT_ROOT/.venv/bin/rlgpt}
PY=${PY:-$RLGPT_ROOT/.venv/bin/python}
[[ -x $RLGPT ]] || die "no $RLGPT: run make setup first"

# service | image | container port | health service name | metrics port inside the pod (one netns: distinct)
SERVICES=(
  "llm|llm|8080||"
  "env|env-server|50051|rlgpt.v1.EnvService|9101"
  "learner|learner|50053|rlgpt.v1.LearnerService|9103"
  "critic|critic|50054|rlgpt.v1.CriticService|9104"
  "planner|planner|50052|rlgpt.v1.PlannerService|9102"
)
for entry in "${SERVICES[@]}"; do
  IFS='|' read -r _ image _ _ _ <<<"$entry"
  podman image exists "$(image_ref "$image")" || die "image $(image_ref "$image") is missing: run make images-local"
done
podman pod exists "$POD" && die "a pod named $POD exists already (another smoke run?); podman pod rm -f $POD"

total=$(now)
timings=()
LOGS=$BUILD_DIR/smoke-logs
mkdir -p "$LOGS"
cleanup() {
  local rc=$? t
  t=$(now)
  if podman pod exists "$POD" 2>/dev/null; then
    for entry in "${SERVICES[@]}"; do
      IFS='|' read -r name _ _ _ _ <<<"$entry"
      podman logs "$POD-$name" >"$LOGS/$name.log" 2>&1 || true
    done
    podman pod rm -f -t 10 "$POD" >/dev/null 2>>"$LOGS/podman.log" || true
  fi
  log "pod $POD removed in $(since "$t"); container logs in $LOGS"
  if ((${#timings[@]})); then printf '\nsmoke-images timings\n'; printf '  %s\n' "${timings[@]}"; fi
  printf '  total: %s (exit %d)\n' "$(since "$total")" "$rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read -r P_LLM P_ENV P_LEARNER P_CRITIC P_PLANNER < <("$PY" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
for s in socks:
    s.close()
EOF
)
declare -A HOST_PORT=([llm]=$P_LLM [env]=$P_ENV [learner]=$P_LEARNER [critic]=$P_CRITIC [planner]=$P_PLANNER)

mkdir -p "$RUNS"
chown 10001:10001 "$RUNS" 2>/dev/null || chmod 0777 "$RUNS"
t=$(now)
# /dev/shm is the pod's (shared IPC namespace): Sample Factory's shared-memory buffers need more than 64 MiB.
podman pod create --name "$POD" --shm-size 1g \
  -p "127.0.0.1:$P_LLM:8080" -p "127.0.0.1:$P_ENV:50051" -p "127.0.0.1:$P_LEARNER:50053" \
  -p "127.0.0.1:$P_CRITIC:50054" -p "127.0.0.1:$P_PLANNER:50052" >/dev/null
llm_env=(-e RLGPT_LLM_BASE_URL=http://127.0.0.1:8080/v1 -e RLGPT_LLM_MODEL=local -e RLGPT_LLM_STRUCTURED=json_object)
declare -A EXTRA=(
  [llm]=""
  [env]=""
  [learner]="-e RLGPT_LEARNER_ENV_SERVER=127.0.0.1:50051"
  [critic]="${llm_env[*]}"
  [planner]="${llm_env[*]} -e RLGPT_PLANNER_ENV_SERVER=127.0.0.1:50051 -e RLGPT_PLANNER_LEARNER=127.0.0.1:50053
    -e RLGPT_PLANNER_CRITIC=127.0.0.1:50054 -e RLGPT_PLANNER_RUN_DIR=$RUNS
    -e RLGPT_PLANNER_LIBRARY_PATH=$RUNS/skill_library.json -v $RUNS:$RUNS"
)
for entry in "${SERVICES[@]}"; do
  IFS='|' read -r name image port _ metrics <<<"$entry"
  # shellcheck disable=SC2206  # the flags above are split on purpose
  extra=(${EXTRA[$name]})
  [[ -n $metrics ]] && extra+=(-e "RLGPT_METRICS_PORT=$metrics")
  # --init: PID 1 forwards SIGTERM and reaps the training jobs' and skill workers' processes.
  podman run -d --pod "$POD" --name "$POD-$name" --init "${PODMAN_ARGS[@]}" "${extra[@]}" "$(image_ref "$image")" \
    >/dev/null 2>>"$LOGS/podman.log"
done
timings+=("pod + 5 containers started: $(since "$t")")
log "pod $POD: llm :$P_LLM env :$P_ENV learner :$P_LEARNER critic :$P_CRITIC planner :$P_PLANNER (127.0.0.1)"

# --- health: the image's own HEALTHCHECK inside each container, and gRPC health through the published ports ----
t=$(now)
pending=(llm env learner critic planner)
deadline=$((SECONDS + HEALTH_TIMEOUT))
while ((${#pending[@]})); do
  still=()
  for name in "${pending[@]}"; do
    state=$(podman inspect --format '{{.State.Status}}' "$POD-$name" 2>/dev/null || echo gone)
    if [[ $state != running ]]; then
      podman logs "$POD-$name" 2>&1 | tail -30 >&2
      die "container $POD-$name is $state"
    fi
    if podman healthcheck run "$POD-$name" >/dev/null 2>&1; then
      timings+=("$name healthy after $(since "$t")")
    else
      still+=("$name")
    fi
  done
  pending=("${still[@]+"${still[@]}"}")
  ((${#pending[@]})) || break
  ((SECONDS < deadline)) || die "not healthy within ${HEALTH_TIMEOUT}s: ${pending[*]}"
  sleep 2
done
for entry in "${SERVICES[@]}"; do
  IFS='|' read -r name _ _ service _ <<<"$entry"
  [[ -n $service ]] || continue
  "$RLGPT" health "127.0.0.1:${HOST_PORT[$name]}" --service "$service" >&2
done
"$PY" -c "import json, sys, urllib.request; \
m = json.load(urllib.request.urlopen('http://127.0.0.1:$P_LLM/v1/models', timeout=10)); \
print('llm models:', [d['id'] for d in m['data']], file=sys.stderr)"
# Prometheus metrics of the four services, from inside the pod.
podman exec "$POD-env" python -c "import urllib.request
for port in (9101, 9102, 9103, 9104):
    body = urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics', timeout=5).read().decode()
    assert 'rlgpt_' in body, port
print('metrics: 4 endpoints serve rlgpt_* series')" >&2

# --- a short run from the host against the planner container -------------------------------------------------
t=$(now)
log "rlgpt run --planner 127.0.0.1:$P_PLANNER --task $TASK $RUN_ARGS"
# shellcheck disable=SC2086  # RUN_ARGS are flags
if ! report=$(cd "$RLGPT_ROOT" && timeout --signal=INT --kill-after=30 "$RUN_TIMEOUT" \
  "$RLGPT" run --planner "127.0.0.1:$P_PLANNER" --task "$TASK" --runs-dir "$RUNS" $RUN_ARGS); then
  podman logs --tail 40 "$POD-planner" >&2 || true
  die "rlgpt run against the containers failed"
fi
report=$(tail -1 <<<"$report")
[[ -s $report ]] || die "rlgpt run printed $report, which is not a report file"
grep -q "## Sub-tasks" "$report" || die "$report has no Sub-tasks section"
timings+=("rlgpt run ($TASK, $RUN_ARGS): $(since "$t")")
log "report: $report"

# --- graceful stop: SIGTERM, exit code 0, well before the kill timeout ------------------------------------------
for entry in planner critic learner env llm; do
  t=$(now)
  podman stop -t 30 "$POD-$entry" >/dev/null 2>>"$LOGS/podman.log"
  code=$(podman inspect --format '{{.State.ExitCode}}' "$POD-$entry")
  took=$(since "$t")
  timings+=("podman stop $entry: $took, exit code $code")
  [[ $code == 0 ]] || die "$POD-$entry exited with $code on SIGTERM"
  awk -v s="${took% s}" 'BEGIN { exit !(s < 25) }' || die "$POD-$entry took $took to stop (the kill timeout is 30 s)"
done
log "smoke-images passed"
