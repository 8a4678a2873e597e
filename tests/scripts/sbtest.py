# sbtest.py: helpers shared by tests/scripts/test_*.py: paths, running a script with
# the interpreter that runs the tests, fixture results folders in a temp directory,
# editing fixture JSON, hiding scipy or matplotlib from a child process, and trees of
# source files for the source checkers.
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def run(script, *args, env=None):
    """Runs scripts/<script> with the current interpreter; returns CompletedProcess."""
    full = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, os.path.join(SCRIPTS, script), *args],
                          capture_output=True, text=True, env=full, timeout=120)


def source_tree(test, files):
    """A temporary directory holding files ({relative path: text}), removed when the
    unittest.TestCase `test` ends; returns its path."""
    tmp = tempfile.TemporaryDirectory()
    test.addCleanup(tmp.cleanup)
    for path, text in files.items():
        full = os.path.join(tmp.name, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
    return tmp.name


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def results_dir(tmp, machine="machine-a", name="res"):
    """tmp/name/raw/ holding a copy of a fixture machine's JSON."""
    d = os.path.join(tmp, name)
    os.makedirs(os.path.join(d, "raw"))
    for f in os.listdir(fixture(machine)):
        shutil.copy(fixture(machine, f), os.path.join(d, "raw", f))
    return d


def edit(path, fn):
    """Rewrites the JSON file at path with fn(doc) applied in place."""
    with open(path) as f:
        doc = json.load(f)
    fn(doc)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def add_twins(path, pick, renames, scale=None, source=None):
    """Appends to the file at path a copy of every entry of `source` (default: the file
    itself) whose name pick(name) accepts, each (old, new) of `renames` replaced in its
    names and each counter of `scale` ({key: factor}) multiplied; returns how many it added."""
    with open(source or path) as f:
        picked = [e for e in json.load(f)["benchmarks"] if pick(e["name"])]
    twins = []
    for e in picked:
        c = json.loads(json.dumps(e))
        for k in ("name", "run_name"):
            for old, new in renames.items():
                if k in c:
                    c[k] = c[k].replace(old, new)
        for k, f in (scale or {}).items():
            if k in c:
                c[k] *= f
        twins.append(c)
    edit(path, lambda doc: doc["benchmarks"].extend(twins))
    return len(twins)


def _matches(e, name):
    n = e.get("run_name") or e["name"]
    return n == name or n.startswith(name + "/")


def scale_time(path, name, factor):
    """Multiplies every time of the run `name` (canonical, without Google Benchmark's
    suffixes) in the file by factor."""
    def fn(doc):
        hits = [e for e in doc["benchmarks"] if _matches(e, name)]
        assert hits, f"{name} not in {path}"
        for e in hits:
            if e.get("aggregate_name") != "cv":
                e["real_time"] *= factor
                e["cpu_time"] *= factor
    edit(path, fn)


def stall_last(path, name, factor=3):
    """Multiplies the time of the last repetition of the run `name` in the file by factor
    (a stalled shared VM): its median stays, its spread grows. Returns how many
    repetitions the run has."""
    n = []

    def fn(doc):
        reps = [e for e in doc["benchmarks"] if _matches(e, name) and e.get("run_type") != "aggregate"]
        assert reps, f"{name} not in {path}"
        reps[-1]["real_time"] *= factor
        n.append(len(reps))
    edit(path, fn)
    return n[0]


def set_counter(path, name, counter, value):
    def fn(doc):
        hits = [e for e in doc["benchmarks"] if _matches(e, name)]
        assert hits, f"{name} not in {path}"
        for e in hits:
            e[counter] = value
    edit(path, fn)


def hide_module(tmp, module, error="ImportError"):
    """env for a child process in which `import module` raises `error`."""
    d = os.path.join(tmp, f"hide-{module}")
    os.makedirs(os.path.join(d, module), exist_ok=True)
    with open(os.path.join(d, module, "__init__.py"), "w") as f:
        f.write(f"raise {error}('{module} hidden by the test')\n")
    return {"PYTHONPATH": d}


def snapshot(d):
    """{relative path: bytes} of every file under d, hidden ones included."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out
