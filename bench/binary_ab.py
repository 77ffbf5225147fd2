#!/usr/bin/env python3
"""Two Kiln builds side by side on whole models: each model compiled untuned by both (fresh databases),
the two packages and ONNX Runtime run in alternation, minima of per-round medians.

Usage:
  bench/binary_ab.py --a OLD/kiln --b NEW/kiln MODEL.onnx [MODEL.onnx ...]
                     [--rounds 4] [--repeat 15] [--threads 1] [--profile [--moved 5 | --changed | --groups FILE]]

A model's inputs are the .npy files of MODEL.inputs/ beside it (the corpus's layout; the file name
is the input's name). The host is noisy: the rounds alternate A, B and ORT, and the table gives
each one's minimum over the rounds of `kiln run --repeat R --json`'s median. --profile adds, per
model, the sum over groups of each group's minimum over the rounds (`kiln run --profile`), which
separates a kernel's change from the host's drift, and the groups whose minima moved most, or, with
--changed, the groups whose schedule differs between the two packages (their manifests) and the sum
of those groups' minima: a change of defaults measured on the kernels it changed.
"""
import argparse
import atexit
import glob
import json
import os
import shutil
import subprocess
import tempfile

from ort_timing import OrtTimer


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def group_minima(kiln, pkg, feed_args, threads):
    out = json.loads(run([kiln, "run", pkg, *feed_args, "--profile", "100000", "--threads", str(threads), "--json"]))
    return {g["group"]: g["ms"] for g in out["profile"]}


def schedules(kiln, pkg):
    """Group index -> the schedule its kernel was generated at, from the package's manifest."""
    manifest = json.loads(run([kiln, "inspect", pkg, "--json"]))["manifest"]
    return {i: g.get("schedule_config", "") for i, g in enumerate(manifest["groups"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--a", required=True, help="the kiln CLI of build A (the baseline)")
    ap.add_argument("--b", required=True, help="the kiln CLI of build B")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--moved", type=int, default=5, help="with --profile: list this many groups whose minima moved most")
    ap.add_argument("--changed", action="store_true",
                    help="with --profile: list the groups whose schedule differs between A and B instead, and the "
                         "sum of their minima")
    ap.add_argument("--groups", metavar="FILE",
                    help="with --profile: list, per model, the groups FILE names instead, and the sum of their "
                         "minima; FILE's lines read `MODEL_STEM [G, G, ...]` (a change of code that keeps the "
                         "schedules, its groups found by diffing `kiln inspect --group`)")
    args = ap.parse_args()
    named = {}
    if args.groups:
        with open(args.groups) as f:
            for line in f:
                if line.strip():
                    stem, groups = line.split(None, 1)
                    named[stem] = json.loads(groups)

    print("| model | A ms | B ms | B vs A | ORT ms | ORT/A | ORT/B |" + (" A groups ms | B groups ms |" if args.profile else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|" if args.profile else ""))
    work = tempfile.mkdtemp(prefix="kiln-binary-ab-")
    atexit.register(shutil.rmtree, work, True)  # its packages and databases: hundreds of MB a run
    for model in args.models:
        stem = os.path.splitext(model)[0]
        inputs = {os.path.splitext(os.path.basename(p))[0]: p for p in sorted(glob.glob(stem + ".inputs/*.npy"))}
        feed_args = [a for name, path in inputs.items() for a in ("--input", f"{name}={path}")]
        threads = ["--threads", str(args.threads)]
        pkgs = {}
        for side, kiln in (("A", args.a), ("B", args.b)):
            db, pkg = os.path.join(work, f"{side}.db"), os.path.join(work, f"{side}.kpkg")
            for f in (db, pkg):
                if os.path.exists(f):
                    os.remove(f)
            run([kiln, "compile", model, "--trials", "0", "--db", db, "-o", pkg, "-q", *threads])
            pkgs[side] = (kiln, pkg)
        ort = OrtTimer(model, inputs, args.threads)
        best = {"A": float("inf"), "B": float("inf"), "ORT": float("inf")}
        groups = {"A": {}, "B": {}}
        for _ in range(args.rounds):
            for side, (kiln, pkg) in pkgs.items():
                out = json.loads(run([kiln, "run", pkg, *feed_args, "--repeat", str(args.repeat), *threads, "--json"]))
                best[side] = min(best[side], out["median_ms"])
                if args.profile:
                    for g, ms in group_minima(kiln, pkg, feed_args, args.threads).items():
                        groups[side][g] = min(groups[side].get(g, float("inf")), ms)
            best["ORT"] = min(best["ORT"], ort.median_ms(args.repeat))
        a, b, o = best["A"], best["B"], best["ORT"]
        row = f"| {os.path.basename(stem)} | {a:.3f} | {b:.3f} | {a / b:.2f} | {o:.3f} | {o / a:.2f} | {o / b:.2f} |"
        if args.profile:
            row += f" {sum(groups['A'].values()):.3f} | {sum(groups['B'].values()):.3f} |"
        print(row, flush=True)
        if args.profile:
            common = set(groups["A"]) & set(groups["B"])
            moved = sorted(common, key=lambda g: -abs(groups["B"][g] - groups["A"][g]))[:args.moved]
            if args.changed or args.groups:
                if args.groups:
                    moved = sorted(g for g in named.get(os.path.basename(stem), []) if g in common)
                else:
                    sched = {side: schedules(kiln, pkg) for side, (kiln, pkg) in pkgs.items()}
                    moved = sorted(g for g in common if sched["A"].get(g) != sched["B"].get(g))
                a_sum, b_sum = sum(groups["A"][g] for g in moved), sum(groups["B"][g] for g in moved)
                print(f"|   {len(moved)} changed groups | {a_sum:.3f} | {b_sum:.3f} | {a_sum / max(b_sum, 1e-9):.2f} "
                      f"| | | |", flush=True)
            for g in moved:
                print(f"|   group {g} | {groups['A'][g]:.3f} | {groups['B'][g]:.3f} | "
                      f"{groups['A'][g] / max(groups['B'][g], 1e-9):.2f} | | | |", flush=True)


if __name__ == "__main__":
    main()
