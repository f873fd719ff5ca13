#!/usr/bin/env python3
"""Shape checks for `vmmc bench` (no speed is asserted).

usage: bench_shape.py <path to vmmc> <case>

Each case runs the tool at tiny sizes with few repetitions and checks what
comes out: the columns, that rows are present with positive values and
min <= value <= max, that ratios to references of the same run are computed,
that CSV and JSON parse, that --plot writes PNG files (skipped without
gnuplot), that bad options are refused with a message, and that a failing
suite is reported while the others still run. Exit 0 = pass, 1 = fail,
77 = skipped (the reason is printed)."""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

COLUMNS = ["suite", "transport", "size", "metric", "value", "unit", "min", "max",
           "ratio", "ratio_to", "flag"]
TINY = ["--quick", "--reps", "2"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(77)


def run(tool, args, expect_rc=0, timeout=150, env=None):
    p = subprocess.run([tool, "bench"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout,
                       env=dict(os.environ, **env) if env else None)
    if expect_rc is not None and p.returncode != expect_rc:
        fail("vmmc bench %s: exit status %d, expected %d\nstdout:\n%s\nstderr:\n%s"
             % (" ".join(args), p.returncode, expect_rc, p.stdout, p.stderr))
    return p


def parse_csv(text):
    rows = list(csv.DictReader(io.StringIO(text)))
    header = text.splitlines()[0].split(",") if text else []
    if header != COLUMNS:
        fail("CSV header is %r, expected %r" % (header, COLUMNS))
    out = []
    for r in rows:
        d = dict(r)
        d["size"] = int(d["size"])
        for k in ("value", "min", "max"):
            d[k] = float(d[k])
        d["ratio"] = float(d["ratio"]) if d["ratio"] != "" else None
        d["ratio_to"] = d["ratio_to"] or None
        d["flag"] = d["flag"] or None
        out.append(d)
    return out


def check_rows(rows, suite):
    mine = [r for r in rows if r["suite"] == suite]
    if not mine:
        fail("no rows for suite %s" % suite)
    seen = set()
    for r in mine:
        key = (r["suite"], r["transport"], r["size"], r["metric"])
        if key in seen:
            fail("duplicate row %r" % (key,))
        seen.add(key)
        if not r["unit"]:
            fail("row %r has no unit" % (key,))
        if not (r["value"] > 0 and r["min"] > 0 and r["max"] > 0):
            fail("row %r: values must be positive: %r" % (key, r))
        if not (r["min"] <= r["value"] <= r["max"]):
            fail("row %r: expected min <= value <= max: %r" % (key, r))
        if r["ratio"] is not None and not (r["ratio"] > 0 and r["ratio_to"]):
            fail("row %r: a ratio needs a positive value and a reference: %r" % (key, r))
    return mine


def find(rows, metric, size=None):
    for r in rows:
        if r["metric"] == metric and (size is None or r["size"] == size):
            return r
    fail("no row for %s%s" % (metric, "" if size is None else " at %d B" % size))


def case_cli(tool):
    p = run(tool, ["--help"])
    for word in ("usage: vmmc bench", "--quick", "--format", "--plot", "--transport", "--reps",
                 "--sizes", "limits", "vmmc", "peers"):
        if word not in p.stdout:
            fail("--help does not mention %r" % word)
    bad = [
        (["--format", "xml"], "unknown format"),
        (["--sizes", "64:8"], "bad --sizes"),
        (["--sizes", "8"], "MIN:MAX"),
        (["--sizes", "1x:2"], "bad --sizes"),
        (["--reps", "0"], "--reps"),
        (["--reps", "many"], "--reps"),
        (["--transport", "ib"], "unknown transport"),
        (["--no-such-option"], "unknown option"),
        (["no-such-suite"], "unknown suite"),
        (["--plot"], "needs a value"),
        (["--bound", "limits/syscall"], "bad --bound"),
        (["--bound", "syscall:wake"], "bad --bound"),
    ]
    for args, msg in bad:
        p = run(tool, args, expect_rc=2)
        if msg not in p.stderr:
            fail("vmmc bench %s: expected a message containing %r, got %r"
                 % (" ".join(args), msg, p.stderr))


def limits_rows(tool, fmt):
    p = run(tool, ["limits"] + TINY + ["--sizes", "8:64K", "--format", fmt])
    return p


def check_limits(rows):
    mine = check_rows(rows, "limits")
    for m in ("cacheline_oneway", "memcpy_bw", "pvw_call", "pvw_bw", "syscall",
              "wake_eventfd_cross", "wake_futex_cross", "wake_eventfd_same", "wake_futex_same"):
        find(mine, m)
    for r in mine:
        if r["size"] and not (8 <= r["size"] <= 65536):
            fail("row outside --sizes 8:64K: %r" % r)
    r = find(mine, "wake_futex_cross")
    if r["ratio"] is None or not r["ratio_to"].startswith("limits/cacheline_oneway"):
        fail("wake_futex_cross has no ratio to limits/cacheline_oneway: %r" % r)
    r = find(mine, "pvw_bw", 65536)
    if r["ratio"] is None or r["ratio_to"] != "limits/memcpy_bw@65536":
        fail("pvw_bw at 64 KiB is not compared with memcpy_bw of the same size: %r" % r)


def case_limits_csv(tool):
    p = limits_rows(tool, "csv")
    check_limits(parse_csv(p.stdout))


def case_limits_json(tool):
    p = limits_rows(tool, "json")
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        fail("JSON does not parse: %s\n%s" % (e, p.stdout))
    for k in ("machine", "rows", "notes", "reps", "quick"):
        if k not in doc:
            fail("JSON has no %r" % k)
    if doc["reps"] != 2 or doc["quick"] is not True:
        fail("JSON does not record the options: %r" % {k: doc[k] for k in ("reps", "quick")})
    for r in doc["rows"]:
        if sorted(r.keys()) != sorted(COLUMNS):
            fail("JSON row keys %r, expected %r" % (sorted(r.keys()), sorted(COLUMNS)))
    check_limits(doc["rows"])


def case_table(tool):
    p = run(tool, ["limits"] + TINY + ["--sizes", "8:8"])
    out = p.stdout
    if "== limits ==" not in out:
        fail("table has no 'limits' group:\n" + out)
    header = [l for l in out.splitlines() if l.startswith("suite")]
    if not header:
        fail("table has no column header:\n" + out)
    for col in ("suite", "transport", "size", "metric", "value", "unit", "min", "max", "ratio",
                "ratio to"):
        if col not in header[0]:
            fail("table header lacks %r: %r" % (col, header[0]))
    if "cacheline_oneway" not in out or "median of 2 repetitions" not in out:
        fail("table lacks rows or the method line:\n" + out)


def case_crash(tool):
    # limits dies at start; peers with an empty size range runs and reports.
    p = run(tool, ["limits", "peers", "--crash-test", "limits", "--format", "json",
                   "--sizes", "3:3"] + TINY, expect_rc=1)
    doc = json.loads(p.stdout)
    texts = [n["text"] for n in doc["notes"] if n["suite"] == "limits"]
    if not any("killed by signal" in t for t in texts):
        fail("the crash of 'limits' is not reported: %r" % doc["notes"])
    if "running peers" not in p.stderr:
        fail("peers did not run after limits failed:\n" + p.stderr)


def case_plot(tool):
    d = tempfile.mkdtemp(prefix="vmmc-bench-plot-")
    try:
        out = os.path.join(d, "img")
        if shutil.which("gnuplot") is None:
            p = run(tool, ["limits"] + TINY + ["--sizes", "8:64K", "--plot", out], expect_rc=1)
            if "apt-get install -y gnuplot-nox" not in p.stderr:
                fail("missing gnuplot is not explained: %r" % p.stderr)
            skip("gnuplot is not installed (the message saying so was checked)")
        run(tool, ["limits"] + TINY + ["--sizes", "8:64K", "--plot", out])
        for name in ("latency.png", "bandwidth.png"):
            path = os.path.join(out, name)
            if not os.path.exists(path):
                fail("--plot did not write " + path)
            with open(path, "rb") as f:
                if f.read(8) != b"\x89PNG\r\n\x1a\n":
                    fail(path + " is not a PNG file")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def case_peers(tool):
    p = run(tool, ["limits", "peers", "--sizes", "8:8", "--format", "json"] + TINY)
    doc = json.loads(p.stdout)
    peers = [r for r in doc["rows"] if r["suite"] == "peers"]
    notes = [n["text"] for n in doc["notes"] if n["suite"] == "peers"]
    if not peers and not notes:
        fail("peers gave neither figures nor a note saying what is missing")
    if peers:
        check_rows(doc["rows"], "peers")
    for n in notes:
        if "not installed" in n and "apt-get install" not in n:
            fail("a missing peer note does not name the package: %r" % n)
    if shutil.which("mpicc.openmpi") and shutil.which("mpirun.openmpi"):
        r = find(peers, "openmpi_lat", 8)
        if r["ratio"] is None or r["ratio_to"] != "peers/openmpi_floor@8":
            fail("Open MPI's latency is not compared with its floor in the same ranks: %r" % r)
    if shutil.which("ucx_perftest"):
        r = find(peers, "ucx_uct_put_short_lat", 8)
        if r["ratio"] is None or not r["ratio_to"].startswith("limits/cacheline_oneway"):
            fail("UCX put latency is not compared with the cache-line floor: %r" % r)
    elif not any("ucx-utils" in n for n in notes):
        fail("no note about the missing ucx_perftest: %r" % notes)


def case_vmmc(tool):
    p = run(tool, ["limits", "vmmc", "--sizes", "8:1M", "--format", "json"] + TINY,
            expect_rc=None, env={"VMMC_NO_SUCH_SETTING": "1"})
    # An unknown setting is warned about once per run, not by the tool, the
    # launcher and every rank.
    if p.stderr.count("unknown setting VMMC_NO_SUCH_SETTING") != 1:
        fail("the unknown setting is not warned about exactly once:\n" + p.stderr)
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        fail("JSON does not parse: %s\n%s\n%s" % (e, p.stdout, p.stderr))
    if p.returncode != 0:
        fail("vmmc bench vmmc failed (status %d): notes %r\n%s"
             % (p.returncode, doc["notes"], p.stderr))
    mine = check_rows(doc["rows"], "vmmc")
    # The floors made the same way: the ping-pong and the stream through a
    # mapping of the peer's region, in the same ranks.
    r = find(mine, "memalloc_lat", 8)
    if r["ratio"] is None or r["ratio_to"] != "vmmc/line_lat@8":
        fail("8 B latency is not compared with its same-method floor: %r" % r)
    r = find(mine, "line_lat", 8)
    if r["ratio"] is None or r["ratio_to"] != "limits/cacheline_oneway@8":
        fail("the floor is not compared with the limits suite's: %r" % r)
    r = find(mine, "memalloc_bw", 1 << 20)
    if r["ratio"] is None or r["ratio_to"] != "vmmc/copy_bw@1048576":
        fail("memalloc_bw at 1 MiB is not compared with its same-method ceiling: %r" % r)
    find(mine, "copy_bw", 1 << 20)
    r = find(mine, "malloc_bw", 1 << 20)
    if r["ratio"] is None or r["ratio_to"] != "limits/memcpy_bw@1048576":
        fail("malloc_bw at 1 MiB is not compared with memcpy of 1 MiB: %r" % r)
    for r in mine:
        if r["flag"] not in (None, "below-floor", "above-ceiling"):
            fail("unknown flag %r" % r)
    for m, size in (("malloc_lat", 8), ("memalloc_send_overhead", 8),
                    ("malloc_send_overhead", 8), ("memalloc_async_return", 1 << 20),
                    ("overlap", 1 << 20), ("notify_poll_lat", 8), ("notify_block_lat", 8),
                    ("notify_epoll_lat", 8), ("notify_service_lat", 8),
                    ("memalloc_fetch_lat", 8), ("memalloc_atomic_lat", 8),
                    ("malloc_atomic_lat", 8)):
        find(mine, m, size)


def case_fm(tool):
    # FM's bandwidth is checked against its ceiling made in its own job.
    p = run(tool, ["fm", "--sizes", "64K:64K", "--format", "json"] + TINY, expect_rc=None)
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        fail("JSON does not parse: %s\n%s\n%s" % (e, p.stdout, p.stderr))
    if p.returncode != 0:
        fail("vmmc bench fm failed (status %d): notes %r\n%s"
             % (p.returncode, doc["notes"], p.stderr))
    mine = check_rows(doc["rows"], "fm")
    r = find(mine, "fm_bw", 65536)
    if r["ratio"] is None or r["ratio_to"] != "fm/copy_best_bw@65536":
        fail("fm_bw is not compared with its ceiling in the same job: %r" % r)
    find(mine, "copy2_bw", 65536)
    find(mine, "fm_bw_vs_vmmc", 65536)


def case_flag(tool):
    # A figure beyond its floor is flagged, in every format: a system call
    # checked against a cross-core wake-up as its "floor" is far below it
    # (the two differ by ~100x), a same-core wake-up checked against a
    # system call is not. Each run measures afresh, and on a loaded host one
    # short run in many finds the system call slow enough to pass its floor:
    # what is checked here is each format, so a format gets three runs to
    # show the flag.
    bounds = ["--bound", "limits/syscall:limits/wake_futex_cross",
              "--bound", "limits/wake_futex_same:limits/syscall"]

    def flagged_run(fmt, is_flagged):
        got = None
        for _ in range(3):
            got = run(tool, ["limits"] + TINY + ["--sizes", "8:8"] + fmt + bounds).stdout
            if is_flagged(got):
                break
        return got

    def json_flagged(out):
        return find(json.loads(out)["rows"], "syscall")["flag"] == "below-floor"
    doc = json.loads(flagged_run(["--format", "json"], json_flagged))
    rows = check_rows(doc["rows"], "limits")
    r = find(rows, "syscall")
    if r["flag"] != "below-floor" or r["ratio_to"] != "limits/wake_futex_cross":
        fail("a figure below its floor is not flagged: %r" % r)
    if not any(n["text"].startswith("! syscall") and "floor" in n["text"] for n in doc["notes"]):
        fail("no note explains the flag: %r" % doc["notes"])
    r = find(rows, "wake_futex_same")
    if r["flag"] is not None or r["ratio_to"] != "limits/syscall":
        fail("a figure above its floor is flagged, or not compared: %r" % r)
    others = [r for r in rows if r["flag"] and r["metric"] != "syscall"]
    if others:
        fail("rows flagged without a bound: %r" % others)

    def table_flagged(out):
        line = [l for l in out.splitlines() if " syscall " in l]
        return bool(line) and "x !" in line[0]
    out = flagged_run([], table_flagged)
    if not table_flagged(out):
        fail("the table does not mark the flagged row: %r" % out)
    if "! = 1 figure beyond the floor or ceiling" not in out:
        fail("the table does not explain the mark:\n" + out)

    def csv_flagged(out):
        return find(parse_csv(out), "syscall")["flag"] == "below-floor"
    if not csv_flagged(flagged_run(["--format", "csv"], csv_flagged)):
        fail("the CSV does not carry the flag")


def case_mpi(tool):
    p = run(tool, ["mpi", "--sizes", "8:8", "--format", "json"] + TINY)
    doc = json.loads(p.stdout)
    rows = [r for r in doc["rows"] if r["suite"] == "mpi"]
    notes = [n["text"] for n in doc["notes"] if n["suite"] == "mpi"]
    if not (shutil.which("mpicc.openmpi") and shutil.which("mpirun.openmpi")):
        if not any("apt-get install" in n for n in notes):
            fail("no Open MPI, and no note naming the package: %r" % notes)
        skip("Open MPI is not installed")
    check_rows(doc["rows"], "mpi")
    for m in ("vader_lat", "vader_rate", "vader_allreduce", "vader_alltoall", "vader_bcast"):
        find(rows, m, 8)
    # the provider's rows, or a note saying why there are none
    vmmc = [r for r in rows if r["metric"].startswith("vmmc_")]
    if not vmmc and not any(n.startswith("vmmc not measured") for n in notes):
        fail("neither vmmc rows nor a note saying why: %r" % notes)
    for r in vmmc:
        if r["ratio_to"] != "mpi/vader_%s@8" % r["metric"][len("vmmc_"):]:
            fail("a vmmc figure is not compared with vader's in the same run: %r" % r)


CASES = {
    "fm": case_fm,
    "flag": case_flag,
    "cli": case_cli,
    "limits_csv": case_limits_csv,
    "limits_json": case_limits_json,
    "table": case_table,
    "crash": case_crash,
    "plot": case_plot,
    "peers": case_peers,
    "vmmc": case_vmmc,
    "mpi": case_mpi,
}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        print(__doc__)
        sys.exit(2)
    CASES[sys.argv[2]](sys.argv[1])
    print("PASS")
