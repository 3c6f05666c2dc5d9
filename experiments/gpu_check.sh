#!/usr/bin/env bash
# GPU check (issue #50): CUDA tests, one short run per env family, throughput cuda vs cpu; at most ~8 minutes,
# every part time-boxed (experiments/gpu_check.py says what runs). Results: 6 small files in OUT_DIR.
#
#   bash experiments/gpu_check.sh OUT_DIR                 # bare GPU image: installs .whl/*.whl first
#   bash experiments/gpu_check.sh --no-wheels OUT_DIR     # a CUDA machine with a normal install (docs/gpu.md)
#   bash experiments/gpu_check.sh --dry-run OUT_DIR       # CPU rehearsal: the same install path and steps,
#                                                         # tiny budgets (tests/test_gpu_check.py runs it)
# On the bare image the wheels come from `bash experiments/gpu_wheels.sh`, run beforehand where PyPI is
# reachable. They are installed with pip --no-index --no-deps --target into a temporary folder, which is put
# on PYTHONPATH with this repository (no editable install). The dry run downloads (and caches) the wheels for
# this machine's Python into .whl-cache/cpXY and hides every installed package the GPU image lacks.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
usage() { echo "usage: bash experiments/gpu_check.sh [--dry-run | --no-wheels] [--budget-s S] OUT_DIR" >&2; }
mode=gpu out="" budget=480
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) mode=dry; shift ;;
    --no-wheels) mode=installed; shift ;;
    --budget-s) [ $# -ge 2 ] || { usage; exit 2; }; budget="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "gpu_check.sh: error: unknown option '$1'" >&2; usage; exit 2 ;;
    *) [ -z "$out" ] || { echo "gpu_check.sh: error: one OUT_DIR only (got '$out' and '$1')" >&2; exit 2; }
       out="$1"; shift ;;
  esac
done
[ -n "$out" ] || { echo "gpu_check.sh: error: name the results folder OUT_DIR" >&2; usage; exit 2; }
[[ "$budget" =~ ^[0-9]+$ ]] && [ "$budget" -ge 30 ] || { echo "gpu_check.sh: error: --budget-s wants whole seconds >= 30, got '$budget'" >&2; exit 2; }
python=${PYTHON:-python3}
mkdir -p "$out" && out=$(cd "$out" && pwd)
start=$(date +%s)
device=cuda tiny=()
if [ "$mode" != installed ]; then
  wheels=.whl
  if [ "$mode" = dry ]; then
    device=cpu tiny=(--tiny)
    py=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    wheels=".whl-cache/cp${py/./}"
    timeout 300 bash experiments/gpu_wheels.sh --python "$py" --dest "$wheels" | tail -1 || {
      echo "gpu_check.sh: error: could not get the wheels for Python $py (see above)" >&2; exit 1; }
  fi
  ls "$wheels"/*.whl >/dev/null 2>&1 || {
    echo "gpu_check.sh: error: no wheels in $wheels/; run 'bash experiments/gpu_wheels.sh' where PyPI is reachable" >&2; exit 2; }
  site=$(mktemp -d)/site
  echo "[gpu_check] installing $(ls "$wheels"/*.whl | wc -l) wheels from $wheels into $site"
  if ! timeout 180 "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
      "$wheels"/*.whl >"$site.log" 2>&1; then
    grep -v "^WARNING: Location" "$site.log" | tail -5 >&2
    echo "gpu_check.sh: error: the wheels did not install into $site" >&2; exit 1
  fi
  export PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}"
  if [ "$mode" = dry ]; then  # hide what the GPU image does not have (experiments/device_image/)
    export DAPO_WHEEL_SITE="$site" PYTHONPATH="$repo/experiments/device_image:$PYTHONPATH"
  fi
fi
left=$((budget - ($(date +%s) - start)))
timeout -k 10 $((left + 30)) "$python" experiments/gpu_check.py --out "$out" --device "$device" \
  --budget-s "$left" "${tiny[@]}"
rc=$?
echo "[gpu_check] exit $rc after $(($(date +%s) - start))s$([ $rc -eq 2 ] || echo "; results in $out")"
exit $rc
