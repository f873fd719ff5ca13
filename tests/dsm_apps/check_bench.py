#!/usr/bin/env python3
"""`vmmc bench dsm --quick`: the shape of its rows, never a speed.

usage: check_bench.py <path to vmmc> <tests/bench directory> [shm|udp]

Both modes' micro-benchmark rows (read and write faults at 128 B and 4 KiB,
lock, barrier, request delay idle and with a busy owner) and every
application's time and speedup rows must be there, positive, with
min <= value <= max, and every minipage row compared with the page row of
the same figure measured in the same run. With a transport (third argument)
the suite runs with --transport and every row must carry it. Exit 0 pass,
1 fail."""
import json
import sys

sys.path.insert(0, sys.argv[2])
import bench_shape as b  # noqa: E402

tool = sys.argv[1]
transport = sys.argv[3] if len(sys.argv) > 3 else None
extra = ["--transport", transport] if transport else []
p = b.run(tool, ["dsm", "--format", "json"] + extra + b.TINY, timeout=280)
doc = json.loads(p.stdout)
rows = [r for r in doc["rows"] if r["suite"] == "dsm"]
notes = [n["text"] for n in doc["notes"] if n["suite"] == "dsm"]
if notes:
    b.fail("notes (something was not measured): %r" % notes)
b.check_rows(doc["rows"], "dsm")
for r in rows:
    if r["transport"] != (transport or "shm"):
        b.fail("row %s carries transport %r, not %r" % (r["metric"], r["transport"],
                                                         transport or "shm"))
micro = {"read_fault": [128, 4096], "read_fault_asleep": [128], "read_fault_mgr": [128],
         "write_fault": [128, 4096],
         "lock": [0],
         "lock_local": [0], "barrier": [0], "delay_idle": [0], "read_fault_busy": [4096],
         "delay_busy": [0], "compute_alone": [0],
         "false_sharing": [128]}
want = [(k, s) for k, sizes in micro.items() for s in sizes]
for app in ("sor", "is", "mm", "tsp", "water"):
    want += [(app, 0), (app + "_speedup", 0)]
for kind, size in want:
    b.find(rows, "page_" + kind, size)
    r = b.find(rows, "minipage_" + kind, size)
    ref = "dsm/page_%s" % kind + ("@%d" % size if size else "")
    if r["ratio_to"] != ref or r["ratio"] is None:
        b.fail("minipage_%s is not compared with page mode of the same run: %r" % (kind, r))
for kind, sizes in micro.items():  # the micro-benchmarks again with VMMC_DSM_THREADS=funneled
    for size in sizes:
        r = b.find(rows, "funneled_" + kind, size)
        ref = "dsm/minipage_%s" % kind + ("@%d" % size if size else "")
        if r["ratio_to"] != ref or r["ratio"] is None:
            b.fail("funneled_%s is not compared with minipage mode of the same run: %r"
                   % (kind, r))
for mode in ("page", "minipage", "funneled"):
    r = b.find(rows, mode + "_compute_dsm", 0)
    if r["ratio_to"] != "dsm/%s_compute_alone" % mode or r["ratio"] is None:
        b.fail("%s_compute_dsm is not compared with the same computation outside the DSM: %r"
               % (mode, r))
for app in ("is", "water"):
    b.find(rows, "mgr1_%s_np3" % app, 0)
    r = b.find(rows, "spread_%s_np3" % app, 0)
    if r["ratio_to"] != "dsm/mgr1_%s_np3" % app or r["ratio"] is None:
        b.fail("spread_%s_np3 is not compared with one manager in the same run: %r" % (app, r))
print("check_bench: ok (%d rows)" % len(rows))
