#!/usr/bin/env bash
# gpu_variant.sh — run HERE (the build machine, no GPU): builds a variant of this tree
# for gpu_run.sh's variants step, from a git revision (a branch such as
# var/two-half-two-input, or a commit), and prints the SB_GPU_VARIANTS entry that
# gpu_prepare.sh packs. See docs/GPU.md, section 3.
#
#   scripts/gpu_variant.sh NAME REV TARGET...     e.g.
#   scripts/gpu_variant.sh B var/two-half-two-input benchmarks/bench_elementwise_cuda tests/elementwise_test
#
# The variant's worktree gets a copy of this tree's build folder (BUILD, default build,
# built at HEAD), its paths moved over and every tracked file's time set back, then the
# files REV changes against HEAD set to now: ninja rebuilds only what REV changes (about
# a minute for one .cu file) instead of the whole tree. The TARGETs' binaries go to
# VARIANTS/NAME (VARIANTS: default /tmp/sb-variants); the worktree stays in
# VARIANTS/NAME.tree until `git worktree remove` (it is printed).
# Exit 2 with one message on bad input, before anything is created.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
die() { echo "gpu_variant: $*" >&2; exit 2; }
[[ $# -ge 3 ]] || die "usage: scripts/gpu_variant.sh NAME REV TARGET... (see the comment at the top)"
name=$1 rev=$2
shift 2
build=${BUILD:-build}
vroot=${VARIANTS:-/tmp/sb-variants}
[[ $name =~ ^[A-Za-z0-9_-]+$ ]] || die "NAME '$name' must be letters, digits, _ or -"
git rev-parse --verify --quiet "$rev^{commit}" >/dev/null || die "REV '$rev' is not a commit of this repository"
[[ -f $build/build.ninja ]] || die "$build is not a configured build folder (BUILD=...)"
for t in "$@"; do
  [[ -x $build/$t ]] || die "TARGET '$t' is not a binary of $build (build it there first: ninja -C $build $t)"
done
tree=$vroot/$name.tree out=$vroot/$name
[[ ! -e $tree && ! -e $out ]] || die "$tree or $out exists (git worktree remove $tree; rm -rf $out)"
mkdir -p "$vroot"
git worktree add --detach --quiet "$tree" "$rev"
cp -a "$build" "$tree/build"
# meson writes absolute paths into build.ninja; the copy must build the worktree's sources
sed -i "s#$root/#$tree/#g" "$tree/build/build.ninja"
# every source older than the copied outputs, then what REV changes against HEAD newer
(cd "$tree" && git ls-files -z | xargs -0 touch -h -d 2020-01-01)
git diff --name-only -z HEAD "$rev" -- | (cd "$tree" && xargs -0 -r touch -h --)
ninja -C "$tree/build" "$@"
mkdir -p "$out"
for t in "$@"; do cp "$tree/build/$t" "$out/"; done
echo "variant $name at $(git rev-parse --short "$rev"): $out (worktree $tree)"
echo "SB_GPU_VARIANTS entry: $name=$out"
