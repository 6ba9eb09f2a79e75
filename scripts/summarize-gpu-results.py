#!/usr/bin/env python3
"""Summarize a GPU test run (gpu-results.jsonl + logs from scripts/gpu-check.sh) into one JSON:
per op and target, the cases/shapes covered, comparisons, failures and the largest error seen.

`--suite DIR` summarizes a scripts/gpu-suite.sh run instead: per seed, passed / failed / skipped,
the tests cut by the time limit (started, never finished) and those never started (in
tests-list.txt, the --gtest_list_tests of the run, but in no shard's log), each shard's total
time, and the slowest 15 tests. Writes DIR/suite-summary.json; exits 1 unless every seed
finished every test and none failed.

`--plan PREV_DIRS LIST SHARDS OUT_DIR` balances a suite run over SHARDS processes from the test
times of earlier runs (PREV_DIRS: directories separated by ':', the first one whose
gpu-tests*.log has a test giving its time, the slowest seed's): longest first onto the least
loaded shard; a test with no time there counts 30 s. Writes OUT_DIR/shard-I.filter (a
--gtest_filter naming the shard's tests) and prints each shard's expected seconds."""
import json, re, sys, os, datetime, glob
import signal

# Piped into head & co.: stop quietly when the reader goes away.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)

# A parameterized test's FAILED line carries ", where GetParam() = ..." before its time.
RESULT = re.compile(r"^\[\s+(OK|FAILED|SKIPPED)\s+\] ([^\s,]+)(?:, where .*)? \((\d+) ms\)")
STARTED = re.compile(r"^\[ RUN\s+\] (\S+)")


def listed_tests(path):
    """The test names of a --gtest_list_tests output (parameterized ones with their suffix)."""
    tests, suite = [], None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith(("Running main", "Note:")):
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        elif suite:
            tests.append(suite + line.split("#")[0].strip())
    return tests


def parse_log(path):
    """(results: name -> (status, ms), started: names in order, last started without a result)."""
    results, started = {}, []
    for line in open(path, errors="replace"):
        m = RESULT.match(line)
        if m:
            results[m.group(2)] = (m.group(1), int(m.group(3)))
            continue
        m = STARTED.match(line)
        if m:
            started.append(m.group(1))
    cut = [t for t in started if t not in results]
    return results, started, cut


def suite(run_dir):
    listed = listed_tests(os.path.join(run_dir, "tests-list.txt"))
    logs = glob.glob(os.path.join(run_dir, "gpu-tests-seed-*-shard-*.log"))
    seeds = sorted({re.search(r"seed-(\d+)-shard", p).group(1) for p in logs}, key=int)
    summary, times, ok = {"listed": len(listed), "seeds": {}}, {}, True
    for seed in seeds:
        results, started, cut, shards = {}, set(), [], []
        shard_logs = sorted(glob.glob(os.path.join(run_dir, f"gpu-tests-seed-{seed}-shard-*.log")),
                            key=lambda p: int(re.search(r"shard-(\d+)", p).group(1)))
        for p in shard_logs:
            r, s, c = parse_log(p)
            shard = int(re.search(r"shard-(\d+)", p).group(1))
            results.update(r)
            started.update(s)
            cut += c
            shards.append({"shard": shard, "tests": len(r), "seconds": round(sum(ms for _, ms in r.values()) / 1000, 1),
                           "cut": c})
            for name, (_, ms) in r.items():
                times.setdefault(name, {"shard": shard, "ms": {}})["ms"][seed] = ms
        not_started = [t for t in listed if t not in started]
        count = lambda st: sum(1 for v in results.values() if v[0] == st)
        row = {"passed": count("OK"), "failed": count("FAILED"), "skipped": count("SKIPPED"), "cut": cut,
               "not_started": not_started, "failed_tests": sorted(t for t, v in results.items() if v[0] == "FAILED"),
               "shards": shards}
        noleak = os.path.join(run_dir, f"gpu-tests-noleak-seed-{seed}.log")
        if os.path.exists(noleak):
            r, _, c = parse_log(noleak)
            row["noleak"] = next(iter(r.values()))[0] if r else ("cut" if c else "not started")
            ok = ok and row["noleak"] in ("OK", "SKIPPED")
        ok = ok and row["failed"] == 0 and not cut and not not_started
        summary["seeds"][seed] = row
        print(f"seed {seed}: {row['passed']} passed, {row['failed']} failed, {row['skipped']} skipped, "
              f"{len(cut)} cut by the limit, {len(not_started)} not started (of {len(listed)} listed)"
              + (f"; NoLeak {row['noleak']}" if "noleak" in row else ""))
        for t in row["failed_tests"]:
            print(f"  FAILED       {t}")
        for t in cut:
            print(f"  cut          {t}")
        for t in not_started:
            print(f"  not started  {t}")
        print("  shards (s):  " + "  ".join(f"{s['shard']}: {s['seconds']:.0f}" + ("+cut" if s["cut"] else "")
                                           for s in shards))
    slowest = sorted(times.items(), key=lambda kv: -max(kv[1]["ms"].values()))[:15]
    summary["slowest"] = [{"test": t, "shard": v["shard"], "ms": v["ms"]} for t, v in slowest]
    print("slowest tests (ms per seed" + (": " + ", ".join(seeds) if seeds else "") + "):")
    for t, v in slowest:
        cols = " ".join(f"{v['ms'].get(s, 0):>7}" for s in seeds)
        print(f"  {cols}  shard {v['shard']}  {t}")
    json.dump(summary, open(os.path.join(run_dir, "suite-summary.json"), "w"), indent=1)
    return 0 if ok and seeds else 1


def main(run_dir, commit, out):
    all_rows = [json.loads(l) for l in open(os.path.join(run_dir, "gpu-results.jsonl"))]
    # Op comparisons carry "op"; the whole-model tests (GpuModelTest) write rows keyed by "test".
    rows = [r for r in all_rows if "op" in r]
    model = [r for r in all_rows if "test" in r]
    gpu = open(os.path.join(run_dir, "gpu.txt")).read().strip().splitlines()[-1].split(", ")
    log = open(os.path.join(run_dir, "gpu-tests.log"), errors="replace").read()
    seed = re.search(r"seed (\d+)", log).group(1)
    ops = {}
    for r in rows:
        key = (r["op"], r["target"])
        o = ops.setdefault(key, {"op": r["op"], "target": r["target"], "arch": r["arch"], "loaded_as": "PTX" if r["ptx"] else "cubin",
                                 "config": r["config"], "cases": set(), "comparisons": 0, "failed": 0, "max_err": {}})
        o["cases"].add(r["case"])
        o.setdefault("shapes", set()).add(f'{r["output"]} {r["shape"]}')
        o["comparisons"] += 1
        o["failed"] += 0 if r["ok"] else 1
        m = o["max_err"].setdefault(r["output"], {"max": 0.0, "metric": r["metric"]})
        m["max"] = max(m["max"], r["max_err"])
    san = {}
    for tool in ("memcheck", "racecheck"):
        p = os.path.join(run_dir, f"sanitizer-{tool}.log")
        if os.path.exists(p):
            t = open(p, errors="replace").read()
            summ = re.findall(r"(ERROR SUMMARY: .*|RACECHECK SUMMARY: .*)", t)
            kernels = sorted(set(re.findall(r"at void (di::\w+)", t)))
            san[tool] = {"summary": summ[-1] if summ else "no summary", "kernels_reported": kernels}
    result = {
        "gpu": gpu[0], "driver": gpu[1] if len(gpu) > 1 else "?", "commit": commit,
        "date": datetime.date.today().isoformat(), "seed": int(seed),
        "passed": sum(1 for o in ops.values() if o["failed"] == 0), "groups": len(ops),
        "results": [dict(o, cases=sorted(o["cases"]), shapes=sorted(o["shapes"])) for o in ops.values()],
        "compute_sanitizer": san,
        "model_tests": model,
    }
    json.dump(result, open(out, "w"), indent=1)
    for o in result["results"]:
        errs = ", ".join(f'{k} {v["max"]:.3g}' for k, v in o["max_err"].items())
        print(f'{o["op"]:<20} {o["target"]:<6} {o["loaded_as"]:<5} {len(o["cases"]):>2} cases {o["comparisons"]:>3} cmp '
              f'{"ok" if o["failed"] == 0 else str(o["failed"]) + " FAILED":<9} max err: {errs}')
    for r in model:
        print("model:", json.dumps(r))
    for k, v in san.items():
        print(f"compute-sanitizer {k}: {v['summary']} {v['kernels_reported']}")

def plan(prev_dir, list_path, shards, out_dir):
    known = {}
    for d in prev_dir.split(":"):  # the first directory with a time for a test gives it
        here = {}
        for p in glob.glob(os.path.join(d, "gpu-tests*.log")):
            for name, (_, ms) in parse_log(p)[0].items():
                here[name] = max(here.get(name, 0), ms / 1000)
        for name, sec in here.items():
            known.setdefault(name, sec)
    listed = listed_tests(list_path)
    default = 30.0
    est = {t: known.get(t, default) for t in listed}
    load, members = [0.0] * shards, [[] for _ in range(shards)]
    for t in sorted(listed, key=lambda t: -est[t]):
        i = min(range(shards), key=lambda k: load[k])
        load[i] += est[t]
        members[i].append(t)
    for i in range(shards):
        with open(os.path.join(out_dir, f"shard-{i}.filter"), "w") as f:
            f.write(":".join(members[i]) if members[i] else "NO_TEST_IN_THIS_SHARD")
    unknown = sum(1 for t in listed if t not in known)
    print(f"plan: {len(listed)} tests over {shards} shards from {prev_dir} ({unknown} without a time there: "
          f"{default:.0f} s each); expected seconds per shard: " + ", ".join(f"{x:.0f}" for x in load))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--plan":
        sys.exit(plan(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
    if len(sys.argv) == 3 and sys.argv[1] == "--suite":
        sys.exit(suite(sys.argv[2]))
    if len(sys.argv) != 4:
        sys.exit("usage: summarize-gpu-results.py RUN_DIR COMMIT OUT.json | --suite SUITE_DIR | "
                 "--plan PREV_DIR LIST SHARDS OUT_DIR")
    main(sys.argv[1], sys.argv[2], sys.argv[3])
