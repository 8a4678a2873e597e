#!/usr/bin/env bash
# gpu_variant.sh — run HERE (the build machine, no GPU): builds a variant of this tree
# for gpu_run.sh's variants step, from a patch against HEAD (scripts/variants/*.patch)
# or a git revision (a commit), and prints the SB_GPU_VARIANTS entry that
# gpu_prepare.sh packs. See docs/GPU.md, section 3.
#
#   scripts/gpu_variant.sh NAME PATCH|REV TARGET...     e.g.
#   scripts/gpu_variant.sh D scripts/variants/transpose-pipelined.patch benchmarks/bench_copy_cuda tests/copy_test
#
# Variants waiting for a device live in main as patches: a session's branches do not
# outlive it (each session starts from a clone of main), and a patch that no longer
# applies to HEAD fails test_gpu_scripts.py instead of the device call.
#
# The variant's worktree (HEAD with the patch applied, or REV) gets a copy of this
# tree's build folder (BUILD, default build, built at HEAD), its paths moved over and
# every tracked file's time set back, then the files the variant changes against HEAD
# set to now: ninja rebuilds only what it changes (about a minute for one .cu file)
# instead of the whole tree. The TARGETs' binaries go to
# VARIANTS/NAME (VARIANTS: default /tmp/sb-variants); the worktree stays in
# VARIANTS/NAME.tree until `git worktree remove` (it is printed).
# Exit 2 with one message on bad input, before anything is created.
set -euo pipefail
here=$PWD
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
die() { echo "gpu_variant: $*" >&2; exit 2; }
[[ $# -ge 3 ]] || die "usage: scripts/gpu_variant.sh NAME PATCH|REV TARGET... (see the comment at the top)"
name=$1 rev=$2 patch=
shift 2
build=${BUILD:-build}
vroot=${VARIANTS:-/tmp/sb-variants}
[[ $name =~ ^[A-Za-z0-9_-]+$ ]] || die "NAME '$name' must be letters, digits, _ or -"
if [[ $rev == *.patch ]]; then
  [[ $rev == /* ]] && patch=$rev || patch=$here/$rev
  [[ -f $patch ]] || die "PATCH '$rev' is not a file"
  # checked against HEAD's tree (a scratch index), not this working tree
  index=$(mktemp)
  why=$(GIT_INDEX_FILE=$index git read-tree HEAD && GIT_INDEX_FILE=$index git apply --cached --check "$patch" 2>&1) ||
    { rm -f "$index"; die "PATCH '$rev' does not apply to HEAD: $(echo "$why" | head -1)"; }
  rm -f "$index"
  rev=HEAD
else
  git rev-parse --verify --quiet "$rev^{commit}" >/dev/null || die "REV '$rev' is not a commit of this repository"
fi
[[ -f $build/build.ninja ]] || die "$build is not a configured build folder (BUILD=...)"
for t in "$@"; do
  [[ -x $build/$t ]] || die "TARGET '$t' is not a binary of $build (build it there first: ninja -C $build $t)"
done
tree=$vroot/$name.tree out=$vroot/$name
[[ ! -e $tree && ! -e $out ]] || die "$tree or $out exists (git worktree remove $tree; rm -rf $out)"
mkdir -p "$vroot"
base=$(git rev-parse HEAD)
git worktree add --detach --quiet "$tree" "$rev"
[[ -z $patch ]] || git -C "$tree" apply "$patch"
cp -a "$build" "$tree/build"
# meson writes absolute paths into build.ninja; the copy must build the worktree's sources
sed -i "s#$root/#$tree/#g" "$tree/build/build.ninja"
# every source older than the copied outputs, then what the variant changes against HEAD
# newer (files a patch adds are new already)
(cd "$tree" && git ls-files -z | xargs -0 touch -h -d 2020-01-01)
git -C "$tree" diff --name-only -z "$base" -- | (cd "$tree" && xargs -0 -r touch -h --)
ninja -C "$tree/build" "$@"
mkdir -p "$out"
for t in "$@"; do cp "$tree/build/$t" "$out/"; done
echo "variant $name at $(git rev-parse --short "$rev")${patch:+ + $(basename "$patch")}: $out (worktree $tree)"
echo "SB_GPU_VARIANTS entry: $name=$out"
