# collect: the last step of `ninja -C build benchmark`. Gathers the Google Benchmark
# JSON that the benchmark binaries (and peer runners) wrote into --json-dir, checks
# it, and replaces RESULTS_ROOT/<sb_machine>/ with:
#   raw/*.json      the files' JSON, compacted (plus raw/semantics.json and
#                   raw/recheck.json, scripts/recheck's interleaved re-measurements,
#                   when present)
#   machine.json    the sb_* context keys shared by all files, Google Benchmark's own
#                   machine context (cpus, caches, ...), and per-file keys (sb_family,
#                   dates, executables)
#   TABLES.md       scripts/tables
#   plots/*.png     scripts/plot, unless --no-plots or matplotlib is missing
# and keeps the old folder's NOTES.md, which a person writes (HAND_WRITTEN). Every file must parse, be Google Benchmark JSON with runs named in the vocabulary,
# and carry the same sb_machine. A file whose every run skipped with "no CUDA device"
# (a GPU binary of a CUDA build on a machine without a GPU) is reported in one line
# and left out of raw/: it measured nothing. The new folder is built in a hidden sibling and
# swapped in with renames, so any failure leaves the old folder as it was.
#
# Note [Compact raw JSON]: raw/ keeps every file's JSON document unchanged but not its
# text: one line per top-level key and per benchmark entry, no indentation
# (results.compact_json), a quarter smaller than Google Benchmark's indented output. The
# working tree, results/ included, travels with every device call beside the binaries
# under one size limit (scripts/gpu_prepare.sh), so each machine's folder costs room
# there. json.load and Google Benchmark's tools/compare.py read either form.
#
# Usage: scripts/collect --json-dir BUILD/bench-json --results RESULTS_ROOT [--no-plots]
#        exit 2 with one message on bad input, 1 on a file-system failure.
import argparse
import json
import os
import re
import shutil
import sys

from . import results as sb
from . import tables

GBENCH_MACHINE = ("host_name", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled",
                  "caches", "load_avg", "library_build_type")


def say(msg):
    print(f"collect: {msg}", flush=True)


def read_all(json_dir):
    """Loads and checks every *.json of json_dir -> (RunSet, slug, [paths])."""
    if not os.path.isdir(json_dir):
        raise sb.InputError(json_dir, "no such directory (did the benchmarks run?)")
    paths = sorted(os.path.join(json_dir, f) for f in os.listdir(json_dir)
                   if f.endswith(".json"))
    special = ("semantics.json", "recheck.json")
    if not any(os.path.basename(p) not in special for p in paths):
        raise sb.InputError(json_dir, "no Google Benchmark *.json files")
    rs, slug, first = sb.RunSet(), None, None
    gpu_only = []
    for p in paths:
        if os.path.basename(p) == "semantics.json":
            rs.semantics = sb.load_semantics(p)
            say(f"read {p}: semantic checks {', '.join(sorted(rs.semantics))}")
            continue
        if os.path.basename(p) == "recheck.json":
            rs.recheck = sb.load_recheck(p)
            say(f"read {p}: {len(rs.recheck['cases'])} re-checked case(s)")
            continue
        ctx, runs, skipped = sb.load_gbench(p)
        no_device = [x for x in skipped if x.endswith(": " + sb.NO_DEVICE)]
        if no_device and not runs and len(no_device) == len(skipped):
            # a GPU binary on a machine without a GPU: nothing measured, nothing kept
            n = len(no_device)
            say(f"skipped {p}: {n} GPU run{'s' * (n != 1)}, {sb.NO_DEVICE}")
            gpu_only.append(p)
            continue
        m = ctx.get("sb_machine")
        if not isinstance(m, str) or not m:
            raise sb.InputError(p, "no sb_machine in its context")
        if slug is None:
            slug, first = m, p
        elif m != slug:
            raise sb.InputError(p, f"sb_machine {m!r} differs from {slug!r} in {first}")
        rs.add(p, ctx, runs, skipped)
        say(f"read {p}: {len(runs)} runs")
    paths = [p for p in paths if p not in gpu_only]
    if slug is None:
        raise sb.InputError(json_dir, "no file with measured runs (every run skipped: "
                            f"{sb.NO_DEVICE})")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", slug):
        raise sb.InputError(first, f"sb_machine {slug!r} is not a usable folder name")
    for s in rs.skipped:
        say(f"warning: run reported an error and is left out: {s}")
    return rs, slug, paths


def machine_info(contexts):
    """machine.json: shared sb_* keys, Google Benchmark's machine keys, per-file keys."""
    info, files = {}, {}
    keys = sorted({k for c in contexts.values() for k in c if k.startswith("sb_")})
    for k in keys:
        vals = {p: c[k] for p, c in contexts.items() if k in c}
        if len(set(map(str, vals.values()))) == 1:
            info[k] = next(iter(vals.values()))
        else:
            for p, v in vals.items():
                files.setdefault(os.path.basename(p), {})[k] = v
    first = next(iter(contexts.values()))
    info["gbench"] = {k: first[k] for k in GBENCH_MACHINE if k in first}
    for p, c in contexts.items():
        f = files.setdefault(os.path.basename(p), {})
        f.update({k: c[k] for k in ("executable", "date") if k in c})
    info["files"] = dict(sorted(files.items()))
    return info


def build(rs, paths, tmp, plots):
    os.makedirs(os.path.join(tmp, "raw"))
    for p in paths:  # Note [Compact raw JSON]
        with open(p, encoding="utf-8") as f:
            doc = json.load(f)
        with open(os.path.join(tmp, "raw", os.path.basename(p)), "w", encoding="utf-8") as f:
            f.write(sb.compact_json(doc))
    with open(os.path.join(tmp, "machine.json"), "w", encoding="utf-8") as f:
        json.dump(machine_info(rs.contexts), f, indent=2)
        f.write("\n")
    final = sb.load_results(tmp)  # the folder exactly as tables and plot will read it
    with open(os.path.join(tmp, "TABLES.md"), "w", encoding="utf-8") as f:
        f.write(tables.render(final))
    say(f"TABLES.md written ({len(final.runs)} runs)")
    if plots:
        from . import plot
        plt = plot.pyplot()
        if plt is None:
            say("matplotlib is not installed; no plots")
        else:
            say(f"{len(plot.draw(final, os.path.join(tmp, 'plots'), plt))} plots drawn")


HAND_WRITTEN = ("NOTES.md",)  # a person's words about the machine: a re-run keeps them


def swap(tmp, dest):
    """Puts tmp in dest's place, with the hand-written files of the old dest carried
    over; the old dest is removed only once tmp is in."""
    for name in HAND_WRITTEN:
        if os.path.isfile(os.path.join(dest, name)):
            shutil.copy2(os.path.join(dest, name), os.path.join(tmp, name))
    old = None
    if os.path.exists(dest):
        old = os.path.join(os.path.dirname(dest), f".{os.path.basename(dest)}.old-{os.getpid()}")
        os.rename(dest, old)
    try:
        os.rename(tmp, dest)
    except BaseException:
        if old:
            os.rename(old, dest)
        raise
    if old:
        shutil.rmtree(old)


def main(argv):
    ap = argparse.ArgumentParser(prog="collect", description="Gather benchmark JSON "
                                 "into RESULTS_ROOT/<machine>/ with tables and plots.")
    ap.add_argument("--json-dir", required=True, help="where the benchmarks wrote JSON")
    ap.add_argument("--results", required=True, help="results root (e.g. results/)")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNGs")
    args = ap.parse_args(argv)
    tmp = None
    try:
        rs, slug, paths = read_all(args.json_dir)
        dest = os.path.join(args.results, slug)
        say(f"{len(rs.runs)} runs from {len(rs.contexts)} files for machine {slug}")
        os.makedirs(args.results, exist_ok=True)
        tmp = os.path.join(args.results, f".{slug}.new-{os.getpid()}")
        build(rs, paths, tmp, not args.no_plots)
        swap(tmp, dest)
        tmp = None
        say(f"replaced {dest}")
        return 0
    except sb.InputError as e:
        print(f"collect: error: {e}; {args.results} left unchanged", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"collect: error: {e}; {args.results} left unchanged", file=sys.stderr)
        return 1
    finally:
        if tmp and os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
