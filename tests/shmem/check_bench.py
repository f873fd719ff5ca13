#!/usr/bin/env python3
"""`vmmc bench shmem` at tiny sizes: the shape of its rows, never a speed.

usage: check_bench.py <path to vmmc> <tests/bench directory>

vmmc's rows (put, get, pp, rate, fadd, barrier) must be there with positive
values, min <= value <= max; where Open MPI's OSHMEM is installed its rows
too, and every vmmc row compared with OSHMEM's of the same run; where it is
not, a note naming the package. Exit 0 pass, 1 fail, 77 skipped."""
import json
import shutil
import sys

sys.path.insert(0, sys.argv[2])
import bench_shape as b  # noqa: E402

tool = sys.argv[1]
p = b.run(tool, ["shmem", "--sizes", "8:8", "--format", "json"] + b.TINY, timeout=280)
doc = json.loads(p.stdout)
rows = [r for r in doc["rows"] if r["suite"] == "shmem"]
notes = [n["text"] for n in doc["notes"] if n["suite"] == "shmem"]
b.check_rows(doc["rows"], "shmem")
kinds = {"put": 8, "get": 8, "pp": 8, "rate": 8, "fadd": 8, "barrier": 0}
for k, size in kinds.items():
    r = b.find(rows, "vmmc_" + k, size)
    if r["transport"] != "shm":
        b.fail("vmmc_%s is not over shm: %r" % (k, r))
if shutil.which("oshmem_info"):
    for k, size in kinds.items():
        b.find(rows, "oshmem_" + k, size)
        r = b.find(rows, "vmmc_" + k, size)
        want = "shmem/oshmem_%s" % k + ("@%d" % size if size else "")
        if r["ratio_to"] != want or r["ratio"] is None:
            b.fail("vmmc_%s is not compared with OSHMEM's of the same run: %r" % (k, r))
elif not any("apt-get install" in n for n in notes):
    b.fail("no OSHMEM, and no note naming the package: %r" % notes)
print("check_bench: ok (%d rows; notes: %r)" % (len(rows), notes))
