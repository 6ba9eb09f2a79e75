#!/usr/bin/env python3
"""Summarize a GPU test run (gpu-results.jsonl + logs from scripts/gpu-check.sh) into one JSON:
per op and target, the cases/shapes covered, comparisons, failures and the largest error seen."""
import json, re, sys, os, datetime

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

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
