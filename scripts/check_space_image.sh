#!/usr/bin/env bash
# Build the Space image (Dockerfile) without Docker, serve the environment from it, and probe it from the host.
#
#   bash scripts/check_space_image.sh            # as root on a Debian bookworm machine with network to
#                                                # Debian's mirror and PyPI; ~3-5 min; cleans up after itself
#   PORT=7860 KEEP=1 bash scripts/check_space_image.sh   # KEEP=1 leaves the image and the server's log
#   SCREENSHOT=1 bash scripts/check_space_image.sh       # also plays an episode on /web in headless
#                                                        # Chromium: outputs/web/episode.png
#
# Phases (each prints its wall time; a failure ends the script with one line naming the phase and why):
#   tools    apt-get install buildah debootstrap, if missing
#   base     debootstrap a minimal bookworm (python3, python3-venv, ca-certificates) and commit it as a
#            local image: it replaces the Dockerfile's FROM python:3.11-slim-bookworm, which needs a registry
#   build    buildah bud --isolation chroot --format docker (which keeps HEALTHCHECK) --from <that base>:
#            the Dockerfile as written, but its FROM
#   inspect  the image's size, that torch is absent, that it runs as uid 1000
#   serve    the image's own CMD in a chroot on the host's network (podman run is refused by the sandbox)
#   probe    from the host: scripts/probe_server.py (/health, /tasks, an episode over /ws with FleetEnv,
#            /grader, bad input's 4xx codes), the image's HEALTHCHECK command, `openenv validate --url`
#   web      (SCREENSHOT=1) scripts/screenshot_web.py: Reset, paste the optimum, Run step on /web
# The host side needs the lean install: $PYTHON if set, else .venv/bin/python if it imports fleet_rl, else
# a fresh venv here (pip install -c constraints/env.txt).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$(pwd)
PORT="${PORT:-7860}"
KEEP="${KEEP:-0}"
SCREENSHOT_PATH="${SCREENSHOT_PATH:-outputs/web/episode.png}"
SUITE=bookworm
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
BASE_IMAGE=localhost/fleet-bookworm-py311
IMAGE=localhost/libratio-fleet:check
WORK=$(mktemp -d /tmp/fleet-space-image.XXXXXX)
PHASE=setup
CONTAINER=""
SERVER_PID=""
T_START=$(date +%s)

fail() {
  echo "check_space_image: phase '${PHASE}' failed: $*" >&2
  exit 1
}

cleanup() {
  local rc=$?
  set +e
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  if command -v buildah >/dev/null 2>&1; then
    [[ -n "$CONTAINER" ]] && buildah rm "$CONTAINER" >/dev/null 2>&1
    if [[ "$KEEP" != 1 ]]; then
      buildah rmi -f "$IMAGE" >/dev/null 2>&1
      buildah rmi -f "$BASE_IMAGE" >/dev/null 2>&1
    fi
  fi
  if [[ "$KEEP" == 1 ]]; then
    echo "kept: image $IMAGE, work dir $WORK"
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT

phase() {  # phase NAME: start a phase; phase_done: print its time
  PHASE=$1
  PHASE_T0=$(date +%s)
  echo "=== [${PHASE}] $2"
}
phase_done() {
  echo "=== [${PHASE}] done in $(( $(date +%s) - PHASE_T0 ))s${1:+ ($1)}"
}

run_logged() {  # run_logged LOG WHY CMD...: run CMD into LOG; on failure show its tail and fail with WHY
  local log=$1 why=$2; shift 2
  if ! "$@" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    fail "$why (log: $log)"
  fi
}

lean_venv() {  # lean_venv DIR [PACKAGE...]: a venv on the host with the lean set (and PACKAGEs)
  local dir=$1; shift
  python3 -m venv "$dir" || fail "python3 -m venv $dir"
  [[ -d "$WORK/src" ]] || { mkdir "$WORK/src" && cp -r pyproject.toml README.md fleet_rl rewards "$WORK/src/"; }
  run_logged "$dir.log" "installing the lean set on the host${1:+ with $*}" \
    "$dir/bin/pip" install -q -c constraints/env.txt "$WORK/src" "$@"
}

# --- tools ----------------------------------------------------------------------------------------
phase tools "buildah and debootstrap"
missing=()
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if (( ${#missing[@]} )); then
  [[ $(id -u) == 0 ]] || fail "needs root to apt-get install ${missing[*]}"
  run_logged "$WORK/apt.log" "apt-get update" apt-get update -qq
  run_logged "$WORK/apt.log" "apt-get install ${missing[*]}" \
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
[[ $(id -u) == 0 ]] || fail "buildah's chroot isolation and debootstrap need root"
ss -ltn 2>/dev/null | grep -q ":${PORT} " && fail "port ${PORT} is already in use (set PORT=...)"
phase_done "$(buildah --version | head -n1)"

# --- base -----------------------------------------------------------------------------------------
phase base "debootstrap --variant=minbase ${SUITE} and commit it as ${BASE_IMAGE}"
run_logged "$WORK/debootstrap.log" "debootstrap from ${MIRROR}" \
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$SUITE" "$WORK/rootfs" "$MIRROR"
rm -rf "$WORK/rootfs/var/cache/apt/archives/"*.deb "$WORK/rootfs/var/lib/apt/lists/"*
base=$(buildah from scratch) || fail "buildah from scratch"
CONTAINER=$base
mount_point=$(buildah mount "$base") || fail "buildah mount (needs root)"
tar -C "$WORK/rootfs" -c . | tar -C "$mount_point" -x || fail "copying the root file system into the image"
buildah umount "$base" >/dev/null
run_logged "$WORK/commit.log" "buildah commit of the base" buildah commit --rm "$base" "$BASE_IMAGE"
CONTAINER=""
rm -rf "$WORK/rootfs"
phase_done "$(buildah images --format '{{.Size}}' "$BASE_IMAGE")"

# --- build ----------------------------------------------------------------------------------------
phase build "buildah bud --isolation chroot --from ${BASE_IMAGE} -f Dockerfile ."
# A machine whose TLS goes through its own certificate authority (this sandbox's does) names it in pip's
# config; its RUN steps get that bundle and a pip.conf naming it, as mounts that the image does not keep.
build_mounts=()
ca_bundle="${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}"
if [[ -n "$ca_bundle" && -f "$ca_bundle" ]]; then
  printf '[global]\ncert = /etc/ssl/certs/host-ca.crt\n' >"$WORK/pip.conf"
  build_mounts=(-v "${ca_bundle}:/etc/ssl/certs/host-ca.crt:ro" -v "$WORK/pip.conf:/etc/pip.conf:ro")
  echo "pip in the build trusts the host's certificate bundle ${ca_bundle}"
fi
run_logged "$WORK/build.log" "building the Dockerfile" \
  buildah bud --isolation chroot --network host --layers=false --format docker "${build_mounts[@]}" \
  --from "$BASE_IMAGE" -t "$IMAGE" -f Dockerfile "$REPO"
phase_done

# --- inspect --------------------------------------------------------------------------------------
phase inspect "size, no torch, the user"
size=$(buildah images --format '{{.Size}}' "$IMAGE")
CONTAINER=$(buildah from "$IMAGE") || fail "buildah from ${IMAGE}"
buildah run --isolation chroot "$CONTAINER" python3 -c \
  'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is not None)' \
  || fail "torch is importable in the image"
uid=$(buildah run --isolation chroot "$CONTAINER" id -u)
[[ "$uid" == 1000 ]] || fail "the image runs as uid ${uid}, not 1000"
buildah inspect --type image "$IMAGE" >"$WORK/image.json" || fail "buildah inspect ${IMAGE}"
image_field() {  # image_field PYTHON_EXPRESSION_OF_i: a field of the image's configuration, as JSON
  python3 -c 'import json, sys; i = json.load(open(sys.argv[1])); print(json.dumps(eval(sys.argv[2])))' \
    "$WORK/image.json" "$1"
}
cmd_json=$(image_field 'i["OCIv1"]["config"]["Cmd"]') || fail "the image has no CMD"
healthcheck_json=$(image_field 'i["Docker"]["config"]["Healthcheck"]["Test"]') || fail "the image has no HEALTHCHECK"
phase_done "image ${size}; uid ${uid}; CMD ${cmd_json}"

# --- serve ----------------------------------------------------------------------------------------
phase serve "the image's CMD on the host's network, port ${PORT}"
mapfile -t cmd < <(python3 -c 'import json, sys; print(*json.loads(sys.argv[1]), sep="\n")' "$cmd_json")
[[ "$PORT" == 7860 ]] || cmd=("${cmd[@]/7860/$PORT}")
buildah run --isolation chroot --network host "$CONTAINER" "${cmd[@]}" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 120); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${PORT}/health', timeout=1)" \
    2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 20 "$WORK/server.log" >&2; fail "the server exited"; }
  sleep 0.5
done
python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${PORT}/health', timeout=1)" \
  2>/dev/null || { tail -n 20 "$WORK/server.log" >&2; fail "the server did not answer /health in 60 s"; }
phase_done

# --- probe ----------------------------------------------------------------------------------------
phase probe "scripts/probe_server.py, the HEALTHCHECK, openenv validate"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]] && .venv/bin/python -c 'import fleet_rl.client' 2>/dev/null; then
    PYTHON=.venv/bin/python
  else
    lean_venv "$WORK/client"
    PYTHON=$WORK/client/bin/python
  fi
fi
"$PYTHON" scripts/probe_server.py --url "http://127.0.0.1:${PORT}" || fail "scripts/probe_server.py (above)"
mapfile -t health_cmd < <(python3 -c 'import json, sys; print(*json.loads(sys.argv[1])[1:], sep="\n")' \
  "$healthcheck_json")
if [[ "$PORT" == 7860 ]]; then
  buildah run --isolation chroot --network host "$CONTAINER" "${health_cmd[@]}" \
    || fail "the image's HEALTHCHECK command ${healthcheck_json}"
  echo "HEALTHCHECK ${healthcheck_json}: ok"
fi
openenv_cli=$(dirname "$PYTHON")/openenv
if [[ -x "$openenv_cli" ]]; then
  "$openenv_cli" validate --url "http://127.0.0.1:${PORT}" --json >"$WORK/validate.json" 2>"$WORK/validate.err" \
    || { cat "$WORK/validate.json" "$WORK/validate.err" >&2; fail "openenv validate --url"; }
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("openenv validate --url:", json.dumps({k: r[k] for k in r if k in ("passed", "summary", "level", "status")}))' "$WORK/validate.json"
fi
phase_done

# --- web (SCREENSHOT=1) ---------------------------------------------------------------------------
if [[ "${SCREENSHOT:-0}" == 1 ]]; then
  phase web "headless Chromium plays one episode on /web; the screenshot goes to ${SCREENSHOT_PATH}"
  if ! command -v chromium >/dev/null 2>&1; then
    run_logged "$WORK/apt.log" "apt-get install chromium" \
      env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  fi
  lean_venv "$WORK/web" playwright==1.65.2
  "$WORK/web/bin/python" scripts/screenshot_web.py --url "http://127.0.0.1:${PORT}" --output "$SCREENSHOT_PATH" \
    || fail "scripts/screenshot_web.py (above)"
  phase_done
fi

echo "=== check_space_image passed in $(( $(date +%s) - T_START ))s: ${IMAGE} is ${size}"
