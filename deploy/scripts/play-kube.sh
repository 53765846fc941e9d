#!/usr/bin/env bash
# Runs the kind overlay's workloads with `podman play kube` and the local images, checks that every service
# answers gRPC health (the LLM: its HTTP /v1/models), then takes everything down again (trap: podman kube down, the claims' volumes removed).
#
#   deploy/scripts/play-kube.sh                               # after make images-local
#   PLAY_KUBE_OVERLAY=deploy/k8s/overlays/kind deploy/scripts/play-kube.sh
#
# The overlay is rendered with `kubectl kustomize` and filtered by kube_filter.py to what podman 4.3 can play:
# Deployments (with images in local storage), their ConfigMaps and PersistentVolumeClaims. Dropped and why:
# Namespace, Service (no cluster DNS; each pod is checked at its own IP on podman's bridge network instead),
# NetworkPolicy, HPA, RBAC (Role/RoleBinding/ServiceAccount), Prometheus/Grafana (their images need a registry),
# probes (podman runs them as systemd timers; there is no systemd here), container ports (podman 4.3 would publish
# each on the host's 0.0.0.0, and all services use metrics port 9100), and Secrets (inlined into env).
# The services cannot reach each other by their Service names here, so this checks that each pod starts and
# serves under the manifests' settings (security context, read-only root, volumes, env), not a whole run:
# smoke-images.sh does the run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ENGINE=podman
command -v podman >/dev/null || die "play-kube needs podman (make images-local installs it)"
command -v kubectl >/dev/null || die "play-kube needs kubectl for kustomize (make setup-system installs it)"
podman_host_args
OVERLAY=${PLAY_KUBE_OVERLAY:-$RLGPT_ROOT/deploy/k8s/overlays/kind}
HEALTH_TIMEOUT=${PLAY_KUBE_HEALTH_TIMEOUT:-240}
RLGPT=${RLGPT:-$RLGPT_ROOT/.venv/bin/rlgpt}
PY=${PY:-$RLGPT_ROOT/.venv/bin/python}
WORK=$BUILD_DIR/play-kube
[[ -f $OVERLAY/kustomization.yaml ]] || die "no kustomization in $OVERLAY"
[[ -x $RLGPT ]] || die "no $RLGPT: run make setup first"
mkdir -p "$WORK"

total=$(now)
timings=()
t=$(now)
kubectl kustomize "$OVERLAY" >"$WORK/rendered.yaml"
mapfile -t have < <(podman images --format '{{.Repository}}:{{.Tag}}' | grep -v '<none>')
have_args=()
for image in "${have[@]}"; do have_args+=(--have-image "$image"); done
"$PY" "$RLGPT_ROOT/deploy/scripts/kube_filter.py" "${have_args[@]}" --configmaps-out "$WORK/configmaps.yaml" \
  "$WORK/rendered.yaml" >"$WORK/play.yaml" 2>"$WORK/filter.log" || { cat "$WORK/filter.log" >&2; die "kube_filter.py failed"; }
sed 's/^kube_filter: /  /' "$WORK/filter.log" >&2
# deployment | first container | its port | grpc or http | volumes made from claims
# (ports from the rendered overlay: the filter removes them from what podman plays)
mapfile -t WORKLOADS < <("$PY" - "$WORK/play.yaml" "$WORK/rendered.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
claims = " ".join(d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim")
played = {(d["kind"], d["metadata"]["name"]) for d in docs}
for d in yaml.safe_load_all(open(sys.argv[2])):
    if not d or d["kind"] not in ("Deployment", "Pod") or (d["kind"], d["metadata"]["name"]) not in played:
        continue
    spec = d["spec"]["template"]["spec"] if d["kind"] == "Deployment" else d["spec"]
    c = spec["containers"][0]
    port = next((p for p in c.get("ports", []) if p.get("name") in ("grpc", "http")), c["ports"][0])
    kind = "grpc" if port.get("name") == "grpc" else "http"
    print(f"{d['metadata']['name']}|{c['name']}|{port['containerPort']}|{kind}|{claims}")
EOF
)
((${#WORKLOADS[@]})) || die "nothing to play"
IFS='|' read -r _ _ _ _ CLAIMS <<<"${WORKLOADS[0]}"
timings+=("render + filter: $(since "$t")")

cleanup() {
  local rc=$? t
  t=$(now)
  for entry in "${WORKLOADS[@]}"; do
    IFS='|' read -r name container _ _ _ <<<"$entry"
    pod=$(podman pod ps --format '{{.Name}}' | grep -E "^$name-pod" | head -1 || true)
    [[ -n $pod ]] && podman logs "$pod-$container" >"$WORK/$name.log" 2>&1 || true
  done
  podman kube down "$WORK/play.yaml" >/dev/null 2>>"$WORK/podman.log" || true
  for claim in $CLAIMS; do podman volume rm -f "$claim" >/dev/null 2>&1 || true; done
  timings+=("podman kube down + volumes removed: $(since "$t")")
  printf '\nplay-kube timings\n'
  printf '  %s\n' "${timings[@]}"
  printf '  total: %s (exit %d); logs in %s\n' "$(since "$total")" "$rc" "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for claim in $CLAIMS; do
  podman volume exists "$claim" && die "a volume named $claim exists already (another play-kube run?)"
done
t=$(now)
configmap_args=()
[[ -s $WORK/configmaps.yaml ]] && configmap_args=(--configmap "$WORK/configmaps.yaml")
podman play kube "${configmap_args[@]}" "$WORK/play.yaml" >"$WORK/play.out" 2>&1 || { cat "$WORK/play.out" >&2; die "podman play kube failed"; }
timings+=("podman play kube (${#WORKLOADS[@]} pods): $(since "$t")")

t=$(now)
pending=("${WORKLOADS[@]}")
deadline=$((SECONDS + HEALTH_TIMEOUT))
while ((${#pending[@]})); do
  still=()
  for entry in "${pending[@]}"; do
    IFS='|' read -r name container port kind _ <<<"$entry"
    pod=$(podman pod ps --format '{{.Name}}' | grep -E "^$name-pod" | head -1 || true)
    [[ -n $pod ]] || die "no pod for $name after podman play kube"
    state=$(podman inspect --format '{{.State.Status}}' "$pod-$container" 2>/dev/null || echo gone)
    if [[ $state != running ]]; then
      podman logs "$pod-$container" 2>&1 | tail -30 >&2
      die "container $pod-$container is $state"
    fi
    infra=$(podman pod inspect --format '{{.InfraContainerID}}' "$pod")
    ip=$(podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$infra")
    ok=false
    if [[ $kind == grpc ]]; then
      "$RLGPT" health "$ip:$port" --timeout 2 >/dev/null 2>&1 && ok=true
    else
      "$PY" -c "import urllib.request; urllib.request.urlopen('http://$ip:$port/v1/models', timeout=2)" \
        >/dev/null 2>&1 && ok=true
    fi
    if $ok; then
      timings+=("$name serving at $ip:$port ($kind) after $(since "$t")")
      if [[ $kind == grpc ]]; then
        # The image's own health command, inside the container, under the manifest's security context.
        podman exec "$pod-$container" rlgpt health "127.0.0.1:$port" >&2
      else
        log "$name: http://$ip:$port/v1/models answers"
      fi
    else
      still+=("$entry")
    fi
  done
  pending=("${still[@]+"${still[@]}"}")
  ((${#pending[@]})) || break
  if ((SECONDS >= deadline)); then
    for entry in "${pending[@]}"; do IFS='|' read -r name _ _ _ _ <<<"$entry"; log "not serving: $name"; done
    die "not serving within ${HEALTH_TIMEOUT}s"
  fi
  sleep 2
done
log "play-kube passed: ${#WORKLOADS[@]} workloads serving"
