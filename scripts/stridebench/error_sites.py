# error_sites: which of the library's user-facing checks (SB_CHECK in lib/ and include/)
# some test raises. A check no test raises is a message no one has read: its condition
# may be wrong, or it may fire where an earlier check should have.
#
#   scripts/check_errors [--build-dir DIR] [--log FILE] [--no-build]
#
# Builds DIR (default build-errors: CUDA off, no benchmarks, -DSB_NOTE_THROWS, Note
# [Raised checks recorded] in include/stridebench/error.h), runs its `meson test` with
# SB_THROW_LOG set, and lists every check no test raised. Left out: the CUDA sources
# (lib/cuda/, *.cu, the cuDNN file: a GPU run reaches them), the branches for builds with
# CUDA (`#ifdef SB_WITH_CUDA`, which this build does not compile) and checks written inside
# a macro (their line is the macro's use). Exit 1 when a check was never raised, 0 when
# each was, 2 when the build or the tests fail. --log reads a log already written (the
# tests' own run, or several concatenated) instead of building. Standard library only.
import argparse
import os
import re
import subprocess
import sys

DIRS = ("lib", "include")
SOURCES = (".h", ".cpp")
SKIP = ("lib/cuda/",)
SKIP_FILES = ("lib/conv/conv_cudnn.cpp",)


def check_sites(root):
    """(path, first line, last line, text) of every SB_CHECK this build compiles, found
    outside comments, macro bodies and `#ifdef SB_WITH_CUDA` branches."""
    sites = []
    for top in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                path = os.path.relpath(os.path.join(dirpath, name), root)
                if not name.endswith(SOURCES) or path.startswith(SKIP) or path in SKIP_FILES:
                    continue
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    lines = f.read().split("\n")
                sites += _sites_of(path, lines)
    return sites


def _sites_of(path, lines):
    out = []
    stack = []  # per open #if: [the macro it tests for #ifdef/#ifndef, in its #else]
    in_macro = False
    for i, line in enumerate(lines):
        s = line.strip()
        directive = re.match(r"#\s*(ifdef|ifndef|if|else|elif|endif)\b(.*)", s)
        if directive:
            kind, rest = directive.group(1), directive.group(2).strip()
            if kind in ("ifdef", "ifndef"):
                stack.append([kind, rest.split()[0] if rest else "", False])
            elif kind == "if":
                stack.append(["if", "", False])
            elif kind in ("else", "elif") and stack:
                stack[-1][2] = True
            elif kind == "endif" and stack:
                stack.pop()
            continue
        starts_macro = s.startswith("#define")
        macro_line = in_macro or starts_macro
        in_macro = macro_line and line.rstrip().endswith("\\")
        cuda_only = any(m == "SB_WITH_CUDA" and (k == "ifdef") != in_else for k, m, in_else in stack)
        if macro_line or cuda_only or s.startswith("//"):
            continue
        k = line.find("SB_CHECK(")
        if k < 0 or "//" in line[:k]:
            continue
        depth, j, text, started = 0, i, line[k:], False
        while True:
            for ch in text:
                if ch == "(":
                    depth, started = depth + 1, True
                elif ch == ")":
                    depth -= 1
            if started and depth <= 0 or j + 1 >= len(lines):
                break
            j += 1
            text = lines[j]
        out.append((path, i + 1, j + 1, s[:120]))
    return out


def raised_sites(log_paths, root):
    """{(path relative to root, line)} from SB_THROW_LOG files; paths as the compiler
    wrote __FILE__ (relative to the build directory) are matched by their part under
    lib/ or include/."""
    raised = set()
    for p in log_paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            for entry in f:
                file, _, line = entry.strip().rpartition(":")
                if not line.isdigit():
                    continue
                m = re.search(r"(?:^|/)((?:lib|include)/.*)$", file)
                if m:
                    raised.add((m.group(1), int(line)))
    return raised


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, **kw).returncode


def main(argv=None):
    ap = argparse.ArgumentParser(prog="check_errors", description=__doc__)
    ap.add_argument("--build-dir", default="build-errors")
    ap.add_argument("--log", action="append", help="read this SB_THROW_LOG file (repeatable) instead of building")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = ap.parse_args(argv)
    root = args.root
    logs = args.log
    if not logs:
        build = os.path.join(root, args.build_dir) if not os.path.isabs(args.build_dir) else args.build_dir
        if not os.path.isdir(os.path.join(build, "meson-private")):
            if run(["meson", "setup", build, root, "-Dcuda=disabled", "-Dbenchmarks=disabled",
                    "-Dcpp_args=-DSB_NOTE_THROWS"]) != 0:
                print("check_errors: meson setup failed", file=sys.stderr)
                return 2
        if run(["ninja", "-C", build]) != 0:
            print("check_errors: the build failed", file=sys.stderr)
            return 2
        log = os.path.join(build, "throws.log")
        if os.path.exists(log):
            os.remove(log)
        env = dict(os.environ, SB_THROW_LOG=log,
                   ASAN_OPTIONS="allocator_may_return_null=1")
        if run(["meson", "test", "-C", build, "--num-processes", str(os.cpu_count() or 2)], env=env) != 0:
            print("check_errors: some tests failed; the list below would not be complete", file=sys.stderr)
            return 2
        logs = [log] if os.path.exists(log) else []
    raised = raised_sites(logs, root)
    sites = check_sites(root)
    never = [s for s in sites if not any((s[0], n) in raised for n in range(s[1], s[2] + 1))]
    print(f"{len(sites) - len(never)} of {len(sites)} checks raised by the tests")
    for path, first, _, text in never:
        print(f"{path}:{first}: never raised: {text}")
    return 1 if never else 0


if __name__ == "__main__":
    sys.exit(main())
