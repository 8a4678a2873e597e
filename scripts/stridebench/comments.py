# comments: fails on a comment in lib/, include/ or benchmarks/ that carries a
# measurement: a time (ns, µs, ms, s), a rate (GB/s, GFLOP/s, TF/s, TOPS...), a speed-up
# ("1.4x faster", "2x slower") or a measured share ("78-81%", "+3-7%", "10% of the
# time"). Comments state the invariant and the decision; the figures behind a decision
# live in docs/notes/<topic>.md with the date, git revision and machine, and the comment
# points there (docs/notes/README.md).
#
#   scripts/check_comments [ROOT]     exit 1 listing every offending line, 0 when clean
#
# C, C++ and CUDA sources (// and /* */ comments, not string literals) and meson.build
# files (# comments). Standard library only.
import argparse
import os
import re
import sys

DIRS = ("lib", "include", "benchmarks")
SOURCES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
NUM = r"\d+(?:[.,]\d+)?"
RANGE = NUM + r"(?:\s?[-–]\s?" + NUM + r")?"
PATTERNS = [
    ("a time", re.compile(r"(?<![\w.])~?" + RANGE + r"\s?(?:ns|µs|us|ms|s)\b")),
    ("a rate", re.compile(RANGE + r"\s?(?:[KMGT]i?B/s|[GT]FLOP/s|[GT]F/s|[GT]?OPS\b|TOPS\b)")),
    ("a speed-up", re.compile(RANGE + r"\s?(?:x|×|times)\s+(?:faster|slower|the speed|speed-up)")),
    ("a measured share", re.compile(r"(?:\+" + RANGE + r"%|" + NUM + r"\s?[-–]\s?" + NUM + r"%|"
                                    + NUM + r"%\s+(?:of (?:the|a|its)\b|faster|slower|more|less))")),
]


def comments_of_source(text):
    """(line number, comment text) for every // and /* */ comment outside string and
    character literals."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in "\"'":
            q, i = c, i + 1
            while i < n and text[i] != q and text[i] != "\n":
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append((line, text[i + 2:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j
            for k, part in enumerate(text[i + 2:j].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, j)
            i = j + 2
        else:
            i += 1
    return out


def comments_of_meson(text):
    out = []
    for k, raw in enumerate(text.split("\n"), 1):
        s, q = raw, None
        for idx, ch in enumerate(s):  # the first # outside a '...' string
            if ch == "'" and (idx == 0 or s[idx - 1] != "\\"):
                q = None if q else ch
            elif ch == "#" and not q:
                out.append((k, s[idx + 1:]))
                break
    return out


def findings(root):
    """[(path, line, what, text)] for every comment that carries a measurement."""
    found = []
    for d in DIRS:
        for base, dirs, files in os.walk(os.path.join(root, d)):
            dirs.sort()
            for f in sorted(files):
                path = os.path.join(base, f)
                if f.endswith(SOURCES):
                    parse = comments_of_source
                elif f == "meson.build":
                    parse = comments_of_meson
                else:
                    continue
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                for line, comment in parse(text):
                    for what, rx in PATTERNS:
                        m = rx.search(comment)
                        if m:
                            found.append((os.path.relpath(path, root), line, what, comment.strip()))
                            break
    return found


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/check_comments", description=__doc__ or "see the top of comments.py")
    ap.add_argument("root", nargs="?", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = ap.parse_args(argv)
    found = findings(args.root)
    for path, line, what, text in found:
        print(f"{path}:{line}: a comment carries {what}: {text}")
    if found:
        print(f"check_comments: {len(found)} comment line(s) carry measurements; move the figures to "
              "docs/notes/<topic>.md and leave the decision and a pointer", file=sys.stderr)
        return 1
    print("check_comments: no measurement in the comments of " + ", ".join(DIRS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
