import json, sys
r = json.load(open(sys.argv[1]))
rows = r["results"]
print("pairs", len(rows), "examples", r["summary"]["examples"], "seconds", r["seconds"])
tot_s = sum(x["seconds"] for x in rows); tot_c = sum(x["compile_seconds"] for x in rows)
print(f"fuzz-path seconds {tot_s:.0f} compile {tot_c:.0f} precompile {sum(x.get('precompile_seconds',0) for x in rows):.0f} warm {sum(x.get('warm_seconds',0) for x in rows):.0f}")
print("-- top compile on fuzz path")
for x in sorted(rows, key=lambda x: -x["compile_seconds"])[:22]:
    print(f"{x['target'][:44]:44} {x['backend']:10} ex {x['examples']:5} s {x['seconds']:6.1f} c {x['compile_seconds']:6.1f} n {x.get('compiles',0):4} pre {x.get('precompile_seconds',0):5.1f} {x['status']:7} {x['retired'] or ''}")
print("-- not retired, < 200 examples")
for x in sorted(rows, key=lambda x: x["examples"]):
    if x["examples"] < 200 and not x["retired"]:
        print(f"{x['target'][:44]:44} {x['backend']:10} ex {x['examples']:5} s {x['seconds']:6.1f} c {x['compile_seconds']:6.1f} slices {x['slices']} warm {x.get('warm')} {x['status']}")
print("-- mutants not found with class")
for x in rows:
    if x["mutant"] and x["status"] != "found":
        print(f"{x['target'][:44]:44} {x['backend']:10} ex {x['examples']:5} {x['status']} classes {[f['class'] for f in x['findings']]} exp {x['expected_class']}")
print("-- found but not shrunk small")
for x in rows:
    if x["mutant"] and x["status"] == "found":
        f = min([f for f in x["findings"] if f["class"] == x["expected_class"]], key=lambda f: f["case_size"])
        if not f["shrunk"] or f["case_size"] > 64:
            print(f"{x['target'][:44]:44} {x['backend']:10} size {f['case_size']:7} shrunk {f['shrunk']} path {f.get('shrink_path')} notes {(f.get('shrink_notes') or [''])[-1][:100]}")
print("-- real targets with findings")
for x in rows:
    if not x["mutant"] and x["findings"]:
        for f in x["findings"]:
            print(f"{x['target'][:40]:40} {x['backend']:10} {f['class']:10} size {f['case_size']} {f['message'][:120]}")
