#!/usr/bin/env python3
"""Reads `go test -json` on stdin, prints each package's result (and the
output of every failed test), and closes with one line:
'N passed, N failed, N skipped'. Exits 1 when anything failed.

--progress also prints each top-level test that took a second or more as
it ends, so a long package shows it is moving."""
import json, sys

progress = "--progress" in sys.argv[1:]

passed = failed = skipped = 0
out = {}          # (pkg, test) -> lines
pkg_fail = []
for line in sys.stdin:
    try:
        ev = json.loads(line)
    except json.JSONDecodeError:
        print(line, end="")
        continue
    pkg, test, act = ev.get("Package", ""), ev.get("Test"), ev.get("Action")
    if act == "output":
        out.setdefault((pkg, test), []).append(ev.get("Output", ""))
        if test is None and (ev["Output"].startswith("ok") or ev["Output"].startswith("FAIL") or ev["Output"].startswith("?")):
            print(ev["Output"], end="", flush=True)
        continue
    if test is None:
        if act == "fail":
            pkg_fail.append(pkg)
        continue
    if progress and act in ("pass", "fail", "skip") and "/" not in test and ev.get("Elapsed", 0) >= 1:
        print(f"  {act} {test} ({ev['Elapsed']:.0f} s, {pkg.rsplit('/', 1)[-1]})", flush=True)
    if act == "pass":
        passed += 1
    elif act == "skip":
        skipped += 1
    elif act == "fail":
        failed += 1
        print("".join(out.get((pkg, test), [])), end="")
for p in pkg_fail:
    if not any(k[0] == p and k[1] for k in out):
        print("".join(out.get((p, None), [])), end="")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or pkg_fail else 0)
