#!/usr/bin/env bash
# Debian tools the deploy checks need: prometheus + promtool (monitoring tests), kubectl (kustomize rendering).
# Installs only what is missing; needs root (or sudo) the first time.
set -euo pipefail
missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
command -v kubectl >/dev/null || missing+=(kubectl)
if ((${#missing[@]})); then
  sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  echo "installing Debian packages: ${missing[*]}"
  # policy-rc.d keeps the package's own Prometheus service from starting; tests start their own.
  made_policy=false
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    "${sudo_cmd[@]}" sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
    made_policy=true
  fi
  # Another setup on the machine (a second clone) may hold dpkg's lock: wait for it rather than fail.
  lock=(-o DPkg::Lock::Timeout=600)
  "${sudo_cmd[@]}" apt-get "${lock[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get "${lock[@]}" install -y -qq --no-install-recommends \
    "${missing[@]}"
  if $made_policy; then "${sudo_cmd[@]}" rm -f /usr/sbin/policy-rc.d; fi
fi
