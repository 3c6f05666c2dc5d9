#!/usr/bin/env bash
# Download the wheels that experiments/gpu_check.sh installs on the bare GPU image (issue #50): exactly those
# of experiments/gpu_wheels.txt, pinned, for CPython on manylinux x86_64, without their dependencies (those
# are on the image or listed too). Run it on a machine with PyPI access; the GPU machine has none.
#
#   bash experiments/gpu_wheels.sh                       # Python 3.12 (the GPU image) into .whl/
#   bash experiments/gpu_wheels.sh --python 3.11 --dest .whl-cache/cp311   # another Python, another folder
#
# Wheels already in the folder are kept (a cache); others are removed, since two versions of one package
# would stop the install. Prints the list and the total size; fails if a wheel is missing or the total
# exceeds 40 MiB (what travels to the GPU machine, the repository included, is limited to 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: bash experiments/gpu_wheels.sh [--python 3.12] [--dest DIR]" >&2; }
die() { echo "gpu_wheels.sh: error: $*" >&2; exit "${2:-1}"; }
py=3.12 dest=.whl
while [ $# -gt 0 ]; do
  case "$1" in
    --python) [ $# -ge 2 ] || { usage; exit 2; }; py="$2"; shift 2 ;;
    --dest) [ $# -ge 2 ] || { usage; exit 2; }; dest="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "gpu_wheels.sh: error: unknown argument '$1'" >&2; usage; exit 2 ;;
  esac
done
[[ "$py" =~ ^3\.[0-9]+$ ]] || { echo "gpu_wheels.sh: error: --python wants a version such as 3.12, got '$py'" >&2; exit 2; }
limit_mib=40
list=experiments/gpu_wheels.txt
mkdir -p "$dest"
stamp="$dest/.python"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" != "$py" ]; then
  echo "gpu_wheels.sh: error: $dest holds wheels for Python $(cat "$stamp"); use another --dest for $py" >&2; exit 2
fi
echo "$py" >"$stamp"
platforms=()
for p in manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 manylinux_2_35 \
         manylinux2014 manylinux1; do platforms+=(--platform "${p}_x86_64"); done
specs=$(sed -e 's/#.*//' "$list" | awk 'NF {print $1}')
shopt -s nullglob nocaseglob
keep=()
for spec in $specs; do
  name=${spec%%==*} version=${spec#*==}
  [ "$name" != "$spec" ] || die "$list: '$spec' is not pinned as name==version" 2
  stem="$(echo "$name" | tr -- '-.' '__')-$version-"
  have=("$dest/$stem"*.whl)
  if [ ${#have[@]} -eq 0 ]; then
    log=$(mktemp)
    if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
        "${platforms[@]}" -d "$dest" "$spec" >"$log" 2>&1; then
      grep -v "^WARNING: Location" "$log" | tail -5 >&2; rm -f "$log"
      die "no wheel of $spec for CPython $py on manylinux x86_64 (pip download failed; see above)"
    fi
    rm -f "$log"
    have=("$dest/$stem"*.whl)
    [ ${#have[@]} -ge 1 ] || die "pip downloaded $spec but no file $stem*.whl appeared in $dest"
  fi
  keep+=("$(basename "${have[0]}")")
done
for f in "$dest"/*.whl; do
  [[ " ${keep[*]} " == *" $(basename "$f") "* ]] || { echo "removing $(basename "$f") (not in $list)"; rm -f "$f"; }
done
total=0
echo "wheels for CPython $py in $dest:"
for f in "${keep[@]}"; do
  size=$(stat -c %s "$dest/$f")
  total=$((total + size))
  awk -v s="$size" -v f="$f" 'BEGIN {printf "  %8.1f KiB  %s\n", s / 1024, f}'
done
awk -v n="${#keep[@]}" -v t="$total" -v l="$limit_mib" 'BEGIN {printf "total: %d wheels, %.1f MiB (limit %d MiB)\n", n, t / 1048576, l}'
[ "$total" -le $((limit_mib * 1048576)) ] || die "the wheels take more than $limit_mib MiB"
