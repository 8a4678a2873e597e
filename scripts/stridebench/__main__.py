"""python3 -m stridebench TOOL [ARGS...]: stridebench's tools behind one command.

Each tool is a module of this package with a main(argv); the files in scripts/ are thin
entry points to the same functions. `python3 -m stridebench TOOL --help` shows a tool's
options.

Note [A Python that has what the tool needs]: a user's `python3` is often not the one
their packages went to (a pyenv or venv build does not see Debian's python3-scipy).
Before a tool runs, the modules it wants are looked for in this interpreter; if one is
missing and another Python on the machine (/usr/bin/python3 first, then python3 on
PATH) has them all, the tool runs again under that one, once (SB_PYTHON_CHOSEN marks the
second run). Otherwise it runs here and says itself what it could not do, as before.
"""
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
SCRIPTS_DIR = os.path.dirname(PACKAGE_DIR)

# name: (module, what it does, modules it wants)
TOOLS = {
    "run": (None, "install what is missing, build, then `bench` (the matrix, tables, plots) or `test` "
                  "(scripts/run)", ()),
    "tables": ("tables", "TABLES.md of a results folder", ()),
    "compare": ("compare", "two results folders (or machines) side by side, with significance", ("scipy",)),
    "plot": ("plot", "the PNGs of a results folder", ("matplotlib",)),
    "collect": ("collect", "the last step of `ninja benchmark`: raw JSON -> results/<machine>/", ("matplotlib",)),
    "recheck": ("recheck", "the comparisons the tables quote, measured again with both sides alternating",
                ("scipy",)),
    "abtest": ("abtest", "two builds of our benchmarks, old and new, alternating on the same rows", ()),
    "peers": ("peers", "the matrix's cases through PyTorch and NumPy", ("numpy", "torch")),
    "check-comments": ("comments", "fails on a comment in lib/, include/ or benchmarks/ carrying a measurement", ()),
    "check-errors": ("error_sites", "lists the library's SB_CHECKs that no test raises (a build with -DSB_NOTE_THROWS)",
                     ()),
}


def usage():
    width = max(len(t) for t in TOOLS)
    lines = ["usage: python3 -m stridebench TOOL [ARGS...]   (TOOL --help for its options)", "", "tools:"]
    lines += [f"  {name:<{width}}  {what}" for name, (_, what, _) in TOOLS.items()]
    return "\n".join(lines)


def _has(python, modules):
    code = "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))"
    try:
        return subprocess.run([python, "-c", code, *modules], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def python_for(modules):
    """(another interpreter that has every module of `modules`, the ones missing here)
    (Note [A Python that has what the tool needs]), or (None, missing) when this one has
    them all or no other does. The same binary can qualify: run with -S or -I, it does
    not see the packages it sees without."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing or os.environ.get("SB_PYTHON_CHOSEN"):
        return None, missing
    for cand in ("/usr/bin/python3", shutil.which("python3")):
        if cand and os.path.exists(cand) and _has(cand, modules):
            return cand, missing
    return None, missing


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    tool, args = argv[0], argv[1:]
    if tool not in TOOLS:
        print(f"stridebench: error: no tool {tool!r}\n{usage()}", file=sys.stderr)
        return 2
    module, _, wants = TOOLS[tool]
    if module is None:  # scripts/run is bash: it installs and builds
        return subprocess.run(["bash", os.path.join(SCRIPTS_DIR, "run"), *args]).returncode
    other, missing = python_for(wants)
    if other:
        env = dict(os.environ, SB_PYTHON_CHOSEN=other,
                   PYTHONPATH=os.pathsep.join(p for p in (SCRIPTS_DIR, os.environ.get("PYTHONPATH")) if p))
        print(f"stridebench: {tool} runs under {other}: {sys.executable} cannot import {', '.join(missing)}",
              file=sys.stderr)
        sys.stderr.flush()
        os.execve(other, [other, "-m", "stridebench", tool, *args], env)
    return importlib.import_module(f"stridebench.{module}").main(args)


if __name__ == "__main__":
    sys.exit(main())
