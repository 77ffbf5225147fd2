#!/usr/bin/env python3
"""Search benchmark: whole-model latency after tuning with each search strategy, at rising budgets.

Usage (a Python with numpy and onnx, e.g. /work/corpus-venv/bin/python):
  bench/search.py CORPUS_DIR --kiln build/client/kiln [--only NAME,... | --subset ci]
                  [--strategies random,evolutionary] [--budgets 2,4,8] [--threads 1]
                  [--repeat 20] [--rounds 2] [--fresh-db] [--json out.json] [--markdown out.md]
                  [--keep WORKDIR]

For each strategy S, one tuning database (DB_S) is shared by every model of the run, in the order
given, as a farm's database is: what S measured for one model is there for the next (the learned
cost model trains on it; random search ignores it). With --fresh-db every model starts from an empty
database instead (a cold start).

For each model, budget b (schedules measured per workload, rising) and strategy S:
  `kiln compile MODEL --trials b --search S --db DB_S`. The budgets deepen one search: the compile at
  b=4 measures only what the b=2 one did not, so the row at b is what a search of b trials per
  workload reaches, and "tuning s" is that step's wall time.
Then every package (and an untuned one, --trials 0) is timed with `kiln run --repeat R --threads T`,
the packages alternating for --rounds rounds; each keeps its best round's median.

Tables: per model, the untuned latency and, for each budget, each strategy's latency and the ratio
random / evolutionary (above 1: the learned search found the faster model); then, over the models,
the geometric means of those ratios per budget, and of each strategy's speedup over untuned.
Measured schedules and tuning time per strategy are summed per budget, and the ratio is also given
for the sum over a model's groups of their chosen schedules' measured medians (what the search
itself saw; steadier than whole-model runs on a noisy machine). Progress goes to stderr.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models as mb  # noqa: E402  (bench/models.py: corpus selection, child processes, timing)

rc = mb.rc


def compile_pkg(a, model, arrays, pkg, trials, search, db):
    cmd = [a.kiln_path, "compile", model, "--trials", str(trials), "--db", db, "-o", pkg, "-q", "--json"]
    if trials > 0:
        cmd += ["--search", search]
    cmd += rc.symbolic_shapes(model, arrays)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.compile_timeout)
    wall = time.time() - t0
    if p.returncode != 0 or not os.path.exists(pkg):
        return {"error": rc.first_error_line(p.stderr + "\n" + p.stdout, "kiln compile:"), "wall_s": wall}
    j = mb.last_json(p.stdout) or {}
    # The sum over groups of their chosen schedule's measured median: the model's latency as the
    # tuning measurements see it (steadier than a whole-model run on a noisy machine).
    est = sum(float(g.get("median_ms", 0) or 0) for g in j.get("groups", []))
    return {"wall_s": wall, "trials_measured": int(j.get("trials_measured", 0)), "measured_sum_ms": est}


def time_pkg(a, pkg, files, threads):
    cmd = [a.kiln_path, "run", pkg, "--repeat", str(a.repeat), "--threads", str(threads), "--json"]
    for k, v in files.items():
        cmd += ["--input", f"{k}={v}"]
    r = mb.run_child(cmd, a.run_timeout)
    j = mb.last_json(r["stdout"])
    if r["rc"] != 0 or not j or "median_ms" not in j:
        return None
    return j["median_ms"]


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def bench_model(meta, a, work, dbs):
    import numpy as np
    name = meta["name"]
    model = os.path.abspath(os.path.join(a.corpus, name + ".onnx"))
    mdir = os.path.join(work, name)
    shutil.rmtree(mdir, ignore_errors=True)
    os.makedirs(mdir)
    files = mb.model_inputs(meta, a.corpus)
    arrays = {k: np.load(v) for k, v in files.items()}
    res = {"model": name, "compile": {}, "ms": {}}
    pkgs = {}
    untuned = os.path.join(mdir, "untuned.kpkg")
    c = compile_pkg(a, model, arrays, untuned, 0, "", os.path.join(mdir, "untuned.db"))
    res["compile"]["untuned"] = c
    if "error" in c:
        mb.log(f"  {name}: untuned compile failed: {c['error']}")
        return res
    pkgs["untuned"] = untuned
    for s in a.strategies:
        db = dbs[s] if not a.fresh_db else os.path.join(mdir, f"{s}.db")
        for b in a.budgets:
            key = f"{s}@{b}"
            pkg = os.path.join(mdir, f"{s}-{b}.kpkg")
            c = compile_pkg(a, model, arrays, pkg, b, s, db)
            res["compile"][key] = c
            mb.log(f"  {name}: {key}: {c.get('trials_measured', '-')} measured in {c['wall_s']:.1f} s"
                   + (f" ERROR {c['error']}" if "error" in c else ""))
            if "error" not in c:
                pkgs[key] = pkg
    for t in a.threads:
        best = {}
        for _ in range(a.rounds):
            for key, pkg in pkgs.items():
                ms = time_pkg(a, pkg, files, t)
                if ms is not None and (key not in best or ms < best[key]):
                    best[key] = ms
        res["ms"][str(t)] = best
    return res


def report(results, a, markdown=False):
    lines = []
    def row(cells):
        lines.append(("| " + " | ".join(cells) + " |") if markdown else "  ".join(cells))
    for t in a.threads:
        t = str(t)
        head = ["model", "untuned ms"]
        for b in a.budgets:
            head += [f"{s[:4]}@{b} ms" for s in a.strategies]
            if "random" in a.strategies and "evolutionary" in a.strategies:
                head.append(f"rand/evo@{b}")
        lines.append(f"\n{t} thread(s):")
        row(head)
        if markdown:
            row(["---"] * len(head))
        ratios = {b: [] for b in a.budgets}
        speedups = {(s, b): [] for s in a.strategies for b in a.budgets}
        for r in results:
            ms = r["ms"].get(t, {})
            cells = [r["model"], f"{ms['untuned']:.3f}" if "untuned" in ms else "-"]
            for b in a.budgets:
                for s in a.strategies:
                    v = ms.get(f"{s}@{b}")
                    cells.append(f"{v:.3f}" if v else "-")
                    if v and "untuned" in ms:
                        speedups[(s, b)].append(ms["untuned"] / v)
                if "random" in a.strategies and "evolutionary" in a.strategies:
                    rv, ev = ms.get(f"random@{b}"), ms.get(f"evolutionary@{b}")
                    cells.append(f"{rv / ev:.3f}" if rv and ev else "-")
                    if rv and ev:
                        ratios[b].append(rv / ev)
            row(cells)
        lines.append("")
        for b in a.budgets:
            parts = [f"budget {b}:"]
            for s in a.strategies:
                g = geomean(speedups[(s, b)])
                measured = sum(r["compile"].get(f"{s}@{bb}", {}).get("trials_measured", 0)
                               for r in results for bb in a.budgets if bb <= b)
                secs = sum(r["compile"].get(f"{s}@{bb}", {}).get("wall_s", 0)
                           for r in results for bb in a.budgets if bb <= b)
                parts.append(f"{s} {g:.3f}x untuned ({measured} measured, {secs:.0f} s)" if g else f"{s} -")
            g = geomean(ratios[b])
            if g:
                parts.append(f"random/evolutionary geomean {g:.3f}")
            est = [r["compile"].get(f"random@{b}", {}).get("measured_sum_ms", 0) /
                   r["compile"].get(f"evolutionary@{b}", {}).get("measured_sum_ms", 0)
                   for r in results
                   if r["compile"].get(f"random@{b}", {}).get("measured_sum_ms")
                   and r["compile"].get(f"evolutionary@{b}", {}).get("measured_sum_ms")]
            g = geomean(est)
            if g:
                parts.append(f"(sum of the groups' measured medians, random/evolutionary: {g:.3f})")
            lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--only")
    ap.add_argument("--subset", choices=sorted(rc.SUBSETS))
    ap.add_argument("--strategies", default="random,evolutionary")
    ap.add_argument("--budgets", default="2,4,8")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--fresh-db", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    ap.add_argument("--keep", metavar="WORKDIR")
    ap.add_argument("--compile-timeout", type=int, default=3600)
    ap.add_argument("--run-timeout", type=int, default=600)
    a = ap.parse_args(argv)
    a.kiln_path = os.path.abspath(a.kiln)
    a.strategies = [s for s in a.strategies.split(",") if s]
    a.budgets = sorted(int(b) for b in a.budgets.split(","))
    a.threads = [int(t) for t in a.threads.split(",")]
    metas = mb.select_models(ap, a)
    work = a.keep or tempfile.mkdtemp(prefix="kiln-search-")
    os.makedirs(work, exist_ok=True)
    dbs = {s: os.path.join(work, f"{s}.db") for s in a.strategies}
    if not a.fresh_db:
        for db in dbs.values():
            for f in (db, db + "-wal", db + "-shm"):
                if os.path.exists(f):
                    os.remove(f)
            shutil.rmtree(db + ".artifacts", ignore_errors=True)
    results = []
    for meta in metas:
        mb.log(f"{meta['name']}")
        results.append(bench_model(meta, a, work, dbs))
    text = report(results, a)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(f"# Search benchmark ({time.strftime('%Y-%m-%d')})\n\n`{' '.join(sys.argv)}`\n\n")
            f.write(report(results, a, markdown=True))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": sys.argv, "results": results}, f, indent=1)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if any(r["ms"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
