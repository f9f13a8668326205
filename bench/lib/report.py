#!/usr/bin/env python3
"""report.py - turn bench/run's raw figures into the Markdown report and CSV.

raw TSV, one line per run:
  workload target rep value unit cpu_seconds peak_rss_kib [disk_read_kib]
  ("-" = none)
meta: key=value lines (machine, software, tree, run settings).
fails: workload<TAB>target<TAB>rep<TAB>reason, one line per failed write run.
checks: workload<TAB>target<TAB>clean|errors<TAB>detail: `btrfs check
  --readonly` of the images ubtrfs wrote (first repetition).
"""
import argparse
import csv
import statistics
import sys

TARGET_ORDER = ["ubtrfs", "ubtrfs-kernelmkfs", "kernel-btrfs", "kernel-ext4",
                "fuse-passthrough", "bindfs", "passthrough_ll", "fuse-memfs"]
# The two passthroughs as bench.sh records them, and the names the report
# gives them; the row "fuse-passthrough" (and latest.csv's) is the better of
# the two in each workload: the goal's "best FUSE passthrough".
PASSTHROUGHS = {"fuse-passthrough": "bindfs", "fuse-passthrough-ll": "passthrough_ll"}
CSV_TARGETS = ["ubtrfs", "ubtrfs-kernelmkfs", "kernel-btrfs", "kernel-ext4", "fuse-passthrough"]
ANCHORS = ["kernel-btrfs", "kernel-ext4", "fuse-passthrough"]

# workload -> (title, what is run, higher_is_better)
WORKLOADS = {
    "seqread-cold": ("Sequential read, cold",
                     "fio read of the 1 GiB file, 1 MiB psync reads; page cache "
                     "dropped (and FUSE daemons remounted) first", True),
    "randread-cold": ("4 KiB random read, cold",
                      "fio randread of 8192 distinct 4 KiB blocks (32 MiB) of the "
                      "256 MiB file, psync, iodepth 1; caches dropped / daemons "
                      "remounted first, so every read misses", True),
    "randread-warm": ("4 KiB random read, warm",
                      "fio randread of the 256 MiB file, psync, iodepth 1, "
                      "time-based, after reading the whole file once", True),
    "find-cold": ("find, cold", "find over the tree; caches dropped first", False),
    "find-warm": ("find, warm", "find over the tree after one unmeasured pass", False),
    "ls-cold": ("ls -lR, cold", "ls -lR of the tree (entries listed per second); "
                "caches dropped first", True),
    "ls-warm": ("ls -lR, warm", "ls -lR after one unmeasured pass", True),
    "tar-cold": ("tar of the tree, cold", "tar -cf - tree | cat >/dev/null (through a "
                 "pipe: GNU tar does not read file data when the archive is /dev/null)",
                 False),
    "git-status-cold": ("git status, cold",
                        "`git --no-optional-locks status --porcelain -- tree` in a repository "
                        "whose index matches the tree (a stat walk: no file is read); caches "
                        "dropped first", False),
    "get-cold": ("Offline copy-out, cold",
                 "`ubtrfs get IMG /tree DEST` against btrfs-progs `btrfs restore -x -m -S "
                 "--path-regex` of the same image (row kernel-btrfs), DEST on tmpfs, "
                 "page cache dropped first; CPU and RSS are the tool's own", False),
    "mount": ("Mount time, cold", "from the mount command's start until it returns with "
              "the mount ready; page cache dropped first", False),
    "mount-large": ("Mount time of a large filesystem, read-only",
                    "mount -o ro of a 10 GiB mkfs.btrfs image holding {large_files} files of "
                    "4 KiB in 100 directories (made by the kernel), from the command's start "
                    "until the mount is ready; page cache dropped first", False),
    "mount-large-rw": ("Mount time of a large filesystem, read-write",
                       "as mount-large, mounted read-write", False),
    "mkfs": ("mkfs of an empty filesystem",
             "`ubtrfs mkfs -f -q IMG` against btrfs-progs `mkfs.btrfs -f -q IMG` (row "
             "kernel-btrfs), IMG a fresh 4 GiB sparse file on the disk of the other images; "
             "time until the tool has exited and `sync IMG` has returned; caches warm; "
             "CPU and RSS are the tool's own", False),
    "seqwrite": ("Sequential write",
                 "fio write of a new {w_seq_mib} MiB file, 1 MiB psync writes, end_fsync=1 "
                 "(the fsync is inside fio's time); fresh filesystem", True),
    "randwrite-4k": ("4 KiB random write",
                     "fio randwrite of {w_rand_io_mib} MiB of distinct 4 KiB blocks of a "
                     "{w_rand_mib} MiB file written (and synced) just before, psync, iodepth 1, "
                     "end_fsync=1; fresh filesystem", True),
    "create-empty": ("Create {w_files} empty files",
                   "{w_files} new empty files in one directory (bench/lib/mkfiles.py: open "
                   "O_CREAT|O_EXCL, close), then the target's sync; files per second over "
                   "both; fresh filesystem", True),
    "create-4k": ("{w_files} files of 4 KiB in 100 directories",
                 "100 new directories sharing {w_files} new files, each written with 4 KiB "
                 "in one write(2) (bench/lib/mkfiles.py), then the target's sync; files per "
                 "second over both; fresh filesystem", True),
    "untar": ("Untar of the tree",
              "`tar -xf` of the tree's tarball (read from the page cache) into a fresh "
              "filesystem, then the target's sync", False),
    "rm-tree": ("rm -rf of the tree",
                "`rm -rf` of the tree just extracted by `untar` on the same mount (caches "
                "warm), then the target's sync; entries per second", True),
    "mkfs-rootdir": ("mkfs --rootdir of the tree",
                     "`ubtrfs mkfs -f -q --rootdir DIR IMG` against btrfs-progs `mkfs.btrfs "
                     "-f -q --rootdir DIR IMG` (row kernel-btrfs), DIR the tree extracted on "
                     "the same disk, IMG a fresh 4 GiB sparse file; time until the tool has "
                     "exited and `sync IMG` has returned; page cache dropped first, so the "
                     "tree is read cold; CPU and RSS are the tool's own", False),
    "snapshot-small": ("Snapshot of a small subvolume",
                       "`ubtrfs subvolume snapshot IMG /small /NAME` of the unmounted image "
                       "against the kernel's `btrfs subvolume snapshot` on a mount of a copy "
                       "(row kernel-btrfs; the mount outside the time), `small` a subvolume of "
                       "ten files beside the tree (made by `mkfs.btrfs --rootdir`); both commit "
                       "before they return; caches warm; CPU and RSS are the command's own "
                       "(the kernel's work in the ioctl counts as the command's system time)",
                       False),
    "snapshot-large": ("Snapshot of the tree's subvolume",
                       "as snapshot-small, of the top level holding the whole tree", False),
}
# Workloads whose rows are offline tools (CPU and RSS are the tool's own, the
# kernel-btrfs row is btrfs-progs): workload -> (ubtrfs label, progs label).
TOOL_WORKLOADS = {
    "get-cold": ("ubtrfs get", "btrfs restore"),
    "mkfs": ("ubtrfs mkfs", "mkfs.btrfs"),
    "mkfs-rootdir": ("ubtrfs mkfs --rootdir", "mkfs.btrfs --rootdir"),
    "snapshot-small": ("ubtrfs subvolume snapshot", "btrfs subvolume snapshot (kernel)"),
    "snapshot-large": ("ubtrfs subvolume snapshot", "btrfs subvolume snapshot (kernel)"),
}
WRITE_WORKLOADS = ["seqwrite", "randwrite-4k", "create-empty", "create-4k", "untar", "rm-tree"]
MEMORY_PREFIX = "memory-cache"
ANON_PREFIX = "memory-anon-cache"


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(s[:-1]) * mult[s[-1]]
    return int(s)


def fmt(v):
    if v is None:
        return "—"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def csvnum(v):
    return f"{v:.6g}"


class Cell:
    """All repetitions of one workload on one target."""

    def __init__(self):
        self.values, self.cpu, self.rss, self.disk, self.unit = [], [], [], [], ""

    def add(self, value, unit, cpu, rss, disk="-"):
        self.values.append(float(value))
        self.unit = unit
        if cpu != "-":
            self.cpu.append(float(cpu))
        if rss != "-":
            self.rss.append(float(rss) / 1024)
        if disk != "-":
            self.disk.append(float(disk) / 1024)

    @property
    def median(self):
        return statistics.median(self.values)


def load(path):
    cells, order = {}, []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 7:
                parts.append("-")
            if len(parts) != 8:
                continue
            wl, tgt, rep, value, unit, cpu, rss, disk = parts
            if wl not in order:
                order.append(wl)
            cells.setdefault(wl, {}).setdefault(tgt, Cell()).add(value, unit, cpu, rss, disk)
    return cells, order


def best_passthrough(cells, fails):
    """Rename the raw passthrough cells and fails (PASSTHROUGHS) and give each
    workload a "fuse-passthrough" cell: the better median of the two (the
    same object).  Returns {workload: name of the better one}."""
    best = {}
    for wl, c in cells.items():
        for raw, name in PASSTHROUGHS.items():
            if raw in c:
                c[name] = c.pop(raw)
        have = [n for n in PASSTHROUGHS.values() if n in c]
        if not have:
            continue
        higher = WORKLOADS.get(wl, (wl, "", True))[2]
        pick = (max if higher else min)(have, key=lambda n: c[n].median)
        c["fuse-passthrough"] = c[pick]
        best[wl] = pick
    for f in fails:
        if len(f) >= 2 and f[1] in PASSTHROUGHS:
            f[1] = PASSTHROUGHS[f[1]]
    return best


def load_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    return meta


def ratio(cells, wl, anchor):
    c = cells.get(wl, {})
    if "ubtrfs" not in c or anchor not in c or c[anchor].median == 0:
        return None
    return c["ubtrfs"].median / c[anchor].median


def goals(cells, meta):
    """(goal, figure, verdict) rows for the issue's targets."""
    rows = []

    def one(goal, wl, limit, at_least):
        r = ratio(cells, wl, "kernel-btrfs")
        if r is None:
            rows.append((goal, "not measured in this run", "—"))
            return
        ok = r >= limit if at_least else r <= limit
        rows.append((goal, f"ubtrfs ÷ kernel-btrfs = {r:.2f}×", "met" if ok else "**not met**"))

    one("Sequential read ≥ 0.9× kernel (throughput)", "seqread-cold", 0.9, True)
    one("Cold find within 2× of the kernel (time)", "find-cold", 2.0, False)
    one("Warm find within 1.5× of the kernel (time)", "find-warm", 1.5, False)
    one("Sequential write ≥ 0.9× kernel (throughput)", "seqwrite", 0.9, True)

    r = ratio(cells, "randwrite-4k", "fuse-passthrough")
    rows.append(("4 KiB random write ≥ the FUSE passthrough's IOPS",
                 "not measured in this run" if r is None
                 else f"ubtrfs ÷ fuse-passthrough = {r:.2f}×",
                 "—" if r is None else ("met" if r >= 1 else "**not met**")))
    for wl, what in [("create-empty", "create"), ("create-4k", "create 4 KiB files"),
                     ("untar", "untar"), ("rm-tree", "rm -rf")]:
        r = ratio(cells, wl, "fuse-passthrough")
        if r is None:
            if wl in cells:
                rows.append((f"Metadata ({what}) ≥ 1.5× the FUSE passthrough",
                             "no figure: a target failed every run", "—"))
            continue
        higher = WORKLOADS[wl][2]
        speed = r if higher else 1 / r
        fig = f"ubtrfs is {speed:.2f}× as fast as fuse-passthrough"
        # The ceiling: what a FUSE filesystem doing no work of its own
        # reaches against the same passthrough (bench/tools/memfs.c).
        c = cells.get(wl, {})
        if "fuse-memfs" in c and "fuse-passthrough" in c and c["fuse-passthrough"].median:
            m = c["fuse-memfs"].median / c["fuse-passthrough"].median
            fig += f" (in-memory ceiling fuse-memfs: {m if higher else 1 / m:.2f}×)"
        rows.append((f"Metadata ({what}) ≥ 1.5× the FUSE passthrough", fig,
                     "met" if speed >= 1.5 else "**not met**"))
    mem = sorted((wl for wl in cells if wl.startswith(MEMORY_PREFIX)),
                 key=lambda w: parse_size(w[len(MEMORY_PREFIX):]))
    if mem:
        parts, ok = [], True
        anon_all = all(ANON_PREFIX + wl[len(MEMORY_PREFIX):] in cells for wl in mem)
        for wl in mem:
            c = cells[wl].get("ubtrfs")
            if not c:
                continue
            size = wl[len(MEMORY_PREFIX):]
            cache = parse_size(size) / (1 << 20)
            if anon_all:
                a = cells[ANON_PREFIX + size].get("ubtrfs")
                peak = max(a.values)
                parts.append(f"cache_size={size}: anonymous peak {peak:.0f} MiB "
                             f"(VmHWM {max(c.values):.0f} MiB)")
            else:
                peak = max(c.values)
                parts.append(f"cache_size={size}: peak {peak:.0f} MiB")
            if peak > cache + 32:
                ok = False
        what = "anonymous RSS" if anon_all else "peak RSS"
        rows.append((f"Daemon memory bounded by its cache setting ({what} ≤ cache_size "
                     "+ 32 MiB)", "; ".join(parts), "met" if ok else "**not met**"))
    else:
        rows.append(("Daemon memory bounded by its cache setting", "not measured in this run",
                     "—"))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--meta", required=True)
    ap.add_argument("--fails", required=True)
    ap.add_argument("--checks", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()

    cells, order = load(a.raw)
    meta = load_meta(a.meta)
    fails = [l.rstrip("\n").split("\t") for l in open(a.fails) if l.strip()]
    best = best_passthrough(cells, fails)
    checks = [l.rstrip("\n").split("\t") for l in open(a.checks) if l.strip()]

    out = []
    w = out.append
    w(f"# ubtrfs benchmark, {meta.get('date', '?')}")
    w("")
    w(f"`bench/run` {meta.get('mode', '?')} run: {meta.get('reps', '?')} repetitions, "
      f"targets alternating within each repetition; pinned: {meta.get('pinned', '?')}; "
      f"took {int(meta.get('elapsed_s', 0)) // 60} min {int(meta.get('elapsed_s', 0)) % 60} s."
      + (" **perf was attached (--profile): figures are disturbed.**"
         if meta.get("profile") == "1" else ""))
    w("")
    w("| | |")
    w("|---|---|")
    for key, label in [("cpu", "CPU"), ("cores", "cores"), ("ram", "RAM"),
                       ("kernel", "kernel"), ("os", "OS"), ("disk", "disk"),
                       ("ubtrfs", "ubtrfs"), ("ubtrfs_build", "ubtrfs build type"),
                       ("git", "source (git describe)"), ("btrfs_progs", "btrfs-progs"),
                       ("fio", "fio"), ("bindfs", "bindfs"),
                       ("passthrough_ll", "libfuse passthrough_ll"),
                       ("load_start", "load average at start"),
                       ("load_end", "load average at end")]:
        w(f"| {label} | {meta.get(key, '?').replace('|', '/')} |")
    w("")
    tb = int(meta.get("tree_bytes", 0) or 0)
    md = int(meta.get("btrfs_metadata", 0) or 0)
    tree = (f"`tree/`: {meta.get('tree_files', '?')} files, {meta.get('tree_dirs', '?')} "
            f"directories, {meta.get('tree_symlinks', '?')} symlinks, "
            f"{tb / (1 << 20):.0f} MiB (bench/lib/mktree.py, deterministic)")
    if "images" in meta:
        if "tree_files" in meta:
            w(f"**Data**: {meta['images']}; {tree} (the --rootdir source, extracted into "
              "a directory on the images' disk, and the tarball of untar/rm-tree).")
        else:
            w(f"**Data**: {meta['images']}.")
    else:
        w("**Data** (the same on every target, written once through kernel mounts): "
          "`data/seq-1g` (1 GiB), `data/rand-256m` (256 MiB), both pseudo-random; "
          f"{tree}. btrfs metadata in use: {md / (1 << 20):.1f} MiB.")
    w("")
    if "passthrough_ll_opts" in meta:
        ptll_md = ("`fuse-passthrough`: the faster, in each workload, of two passthroughs "
                   "over the ext4 mount (the row says which; both have their own rows): "
                   f"bindfs (`-o {meta.get('bindfs_opts', '?')}`, the same kernel-cache "
                   "policy as ubtrfs) and libfuse's own low-level example `passthrough_ll` "
                   f"(`{meta['passthrough_ll_opts']}`: single-threaded, entries, "
                   "attributes and pages cached for a day).")
    else:
        ptll_md = (f"`fuse-passthrough`: bindfs (`-o {meta.get('bindfs_opts', '?')}`, the "
                   "same kernel-cache policy as ubtrfs) over the ext4 mount; libfuse's "
                   "passthrough_ll was not measured ("
                   + meta.get("passthrough_ll", "not selected").replace("|", "/") + ").")
    targets_md = ("**Targets.** `ubtrfs`: the FUSE daemon (`ubtrfs mount -f -o ro`, default "
      "cache_size: 256M, at most an eighth of RAM; no xattr in the images, so once "
      "its xattr scan has run getxattr answers EOPNOTSUPP and `ls -l` sends no "
      "getxattr request) on a btrfs image made by "
      f"{meta.get('ubtrfs_image', '?')}. `ubtrfs-kernelmkfs`: the same daemon on "
      "the image made by mkfs.btrfs (defaults) and populated by the kernel. "
      "`kernel-btrfs`: that mkfs.btrfs image on a "
      "read-only loop device, mounted `-o ro` by the kernel. `kernel-ext4`: an "
      "ext4 image with the same data, `-o ro`. " + ptll_md + " All images are files on the same disk. FUSE daemons are "
      "mounted fresh for every run, so a cold run also has a cold daemon (ubtrfs's "
      "tree-block cache is not emptied by drop_caches). When pinned, the daemons "
      "and the workload share one CPU; kernel threads (loop, btrfs workers) are not "
      "pinned. The offline-tool workloads (`get-cold`, `mkfs`, `mkfs-rootdir`) compare "
      "ubtrfs's tool with btrfs-progs' (`btrfs restore`, `mkfs.btrfs`), recorded in the "
      "kernel-btrfs row as the btrfs reference; they run pinned like the rest. "
      "The snapshot workloads (`snapshot-small`, `snapshot-large`) compare `ubtrfs "
      "subvolume snapshot` of an unmounted image with the kernel's `btrfs subvolume "
      "snapshot` on a mounted copy (kernel-btrfs row). "
      "The write workloads run each repetition on a fresh 4 GiB image made for its target "
      "(`ubtrfs mkfs` for ubtrfs, mkfs.btrfs for ubtrfs-kernelmkfs and kernel-btrfs, "
      "mkfs.ext4 without lazy init for kernel-ext4 and the passthrough) mounted read-write "
      "(ubtrfs: `mount -o rw`, experimental; the passthroughs with the same options "
      "minus ro); "
      "each measured command ends by making its writes durable the target's own way "
      "(syncfs of the kernel mount, of the ext4 below a passthrough; for ubtrfs an fsync of "
      "the mount's root directory, which commits the transaction).")
    if any("fuse-memfs" in c for c in cells.values()):
        targets_md += (" `fuse-memfs` (write workloads only; not in latest.csv): "
                       "`bench/tools/memfs.c`, an in-memory FUSE filesystem that negotiates "
                       "what ubtrfs's read-write mount negotiates and has the same operations, "
                       "so the kernel sends it the same requests, and does no work of its own "
                       "(a hash lookup or a memcpy per request): the ceiling of any FUSE "
                       "filesystem on this kernel and machine.")
    elif "memfs" in meta:
        targets_md += (" `fuse-memfs`, the in-memory ceiling, was not measured ("
                       + meta["memfs"].replace("|", "/") + ").")
    if "images" in meta:
        if not any(wl in WRITE_WORKLOADS for wl in cells):
            targets_md = ("**Targets.** Only the mkfs workloads ran: `ubtrfs mkfs` (row "
                          "ubtrfs) against btrfs-progs' `mkfs.btrfs` (row kernel-btrfs, the "
                          "btrfs reference), both pinned like the read workloads.")
    w(targets_md)
    w("")
    w("Ratios are ubtrfs's median divided by the other target's median, in the "
      "workload's unit: for throughput (MiB/s, IOPS, entries/s, files/s) above 1 is better "
      "for ubtrfs, for times (s, ms) below 1 is better. ubtrfs reads file data through "
      "a read-only mapping of the image; image pages it has touched there and not yet "
      "released count in its peak RSS (VmHWM), although they are page cache, not the "
      "daemon's own memory (see the memory table).")
    w("")
    w("## Goals")
    w("")
    w("| goal | figure | verdict |")
    w("|---|---|---|")
    for g, fig, v in goals(cells, meta):
        w(f"| {g} | {fig} | {v} |")
    w("")

    w("## Figures")
    csv_rows = []
    failed = {}
    for f in fails:
        if len(f) >= 2:
            failed.setdefault(f[0], {}).setdefault(f[1], 0)
            failed[f[0]][f[1]] += 1
            if f[0] not in order:
                order.append(f[0])
                cells.setdefault(f[0], {})
    # No passthrough finished a workload: the best passthrough failed too.
    for wl, byt in failed.items():
        n = sum(byt.get(p, 0) for p in PASSTHROUGHS.values())
        if n and "fuse-passthrough" not in cells.get(wl, {}):
            byt["fuse-passthrough"] = n
    for wl in order:
        if wl.startswith((MEMORY_PREFIX, ANON_PREFIX)) or wl == "memory-mounted":
            continue
        title, what, higher = WORKLOADS.get(wl, (wl, "", True))
        sizes = {k: meta.get(k, "?") for k in ("w_seq_mib", "w_rand_mib", "w_rand_io_mib",
                                               "w_files", "large_files")}
        title, what = title.format(**sizes), what.format(**sizes)
        w("")
        w(f"### {wl}: {title}")
        w("")
        w(f"{what}. {'Higher' if higher else 'Lower'} is better.")
        w("")
        tool = TOOL_WORKLOADS.get(wl)
        cpu_label = "tool CPU s" if tool else "daemon CPU s"
        rss_label = "tool peak RSS MiB" if tool else "daemon peak RSS MiB"
        io_label = ("MiB written to the image" if wl in WRITE_WORKLOADS
                    else "MiB read from the image")
        w(f"| target | median | min–max | unit | ubtrfs ÷ target | {cpu_label} | {rss_label} "
          f"| {io_label} |")
        w("|---|---:|---:|---|---:|---:|---:|---:|")
        for tgt in TARGET_ORDER:
            c = cells[wl].get(tgt)
            if not c:
                continue
            r = ratio(cells, wl, tgt) if tgt != "ubtrfs" else None
            cpu = fmt(statistics.median(c.cpu)) if c.cpu else "—"
            rss = fmt(max(c.rss)) if c.rss else "—"
            disk = fmt(statistics.median(c.disk)) if c.disk else "—"
            label = tgt
            if tgt == "fuse-passthrough" and wl in best:
                label = f"fuse-passthrough (best: {best[wl]})"
            if tool:
                label = f"{tgt} ({tool[1] if tgt == 'kernel-btrfs' else tool[0]})"
            w(f"| {label} | {fmt(c.median)} | {fmt(min(c.values))}–{fmt(max(c.values))} "
              f"| {c.unit} | {'—' if r is None else f'{r:.2f}×'} | {cpu} | {rss} | {disk} |")
            if tgt not in CSV_TARGETS:
                continue
            csv_rows.append((wl, tgt, csvnum(c.median), csvnum(min(c.values)),
                             csvnum(max(c.values)), c.unit))
            if c.cpu:
                csv_rows.append((wl + ".cpu", tgt, csvnum(statistics.median(c.cpu)),
                                 csvnum(min(c.cpu)), csvnum(max(c.cpu)), "s"))
            if c.rss:
                csv_rows.append((wl + ".peak-rss", tgt, csvnum(statistics.median(c.rss)),
                                 csvnum(min(c.rss)), csvnum(max(c.rss)), "MiB"))
            if c.disk:
                csv_rows.append((wl + (".disk-written" if wl in WRITE_WORKLOADS
                                       else ".disk-read"), tgt,
                                 csvnum(statistics.median(c.disk)),
                                 csvnum(min(c.disk)), csvnum(max(c.disk)), "MiB"))
        for tgt in TARGET_ORDER:
            n = failed.get(wl, {}).get(tgt)
            if n and tgt not in cells[wl]:
                w(f"| {tgt} | **failed** ({n} run{'s' if n > 1 else ''}) | — | — | — | — | — | — |")
                if tgt in CSV_TARGETS:
                    csv_rows.append((wl, tgt, "failed", "", "", ""))
            elif n:
                w(f"| {tgt} (failed runs) | {n} more run{'s' if n > 1 else ''} failed, see "
                  "below | | | | | | |")

    mem = sorted((wl for wl in order if wl.startswith(MEMORY_PREFIX)),
                 key=lambda s: parse_size(s[len(MEMORY_PREFIX):]))
    mounted = cells.get("memory-mounted", {}).get("ubtrfs")
    if mounted:
        csv_rows.append(("memory-mounted", "ubtrfs", csvnum(mounted.median),
                         csvnum(min(mounted.values)), csvnum(max(mounted.values)), "MiB"))
    if mem:
        w("")
        w("### memory: daemon peak RSS against cache_size")
        w("")
        w("The ubtrfs daemon mounted with `-o cache_size=N`, then a cold `tar` of the "
          "tree (every tree block and file once); VmHWM of the daemon afterwards. "
          f"The tree's btrfs metadata is {md / (1 << 20):.1f} MiB, so caches larger "
          "than that never fill. VmHWM also counts image pages the daemon has touched "
          "through its read-only mapping of the image and not yet released: clean "
          "page-cache pages, shared with the page cache and reclaimed by the kernel "
          "under pressure. The daemon's own memory is the anonymous part: the peak of "
          "RssAnon, sampled every 10 ms."
          + (f" Right after mounting (nothing read yet) the daemon's peak RSS is "
             f"{fmt(mounted.median)} MiB (median)." if mounted else ""))
        w("")
        w("| cache_size | peak RSS (VmHWM) MiB, median | min–max | peak anonymous RSS MiB, "
          "median | min–max | daemon CPU s |")
        w("|---|---:|---:|---:|---:|---:|")
        for wl in mem:
            c = cells[wl].get("ubtrfs")
            if not c:
                continue
            size = wl[len(MEMORY_PREFIX):]
            an = cells.get(ANON_PREFIX + size, {}).get("ubtrfs")
            anon = (f"{fmt(an.median)} | {fmt(min(an.values))}–{fmt(max(an.values))}"
                    if an else "— | —")
            w(f"| {size} | {fmt(c.median)} | {fmt(min(c.values))}–"
              f"{fmt(max(c.values))} | {anon} | "
              f"{fmt(statistics.median(c.cpu)) if c.cpu else '—'} |")
            csv_rows.append((wl, "ubtrfs", csvnum(c.median), csvnum(min(c.values)),
                             csvnum(max(c.values)), "MiB"))
            if an:
                csv_rows.append((ANON_PREFIX + size, "ubtrfs", csvnum(an.median),
                                 csvnum(min(an.values)), csvnum(max(an.values)), "MiB"))

    if any(wl in WRITE_WORKLOADS for wl in order) or fails or checks:
        w("")
        w("### Write workloads: failed runs and btrfs check")
        w("")
        if fails:
            w("Failed runs (no figure recorded for them; the medians above are over the "
              "runs that worked):")
            w("")
            w("| workload | target | repetition | what happened |")
            w("|---|---|---:|---|")
            for f in fails:
                wl, tgt, rep, why = (f + ["", "", "", ""])[:4]
                w(f"| {wl} | {tgt} | {rep} | {why.replace('|', '/')} |")
        else:
            w("Every write run finished and, at the first repetition, did what it says "
              "(file sizes, entry counts).")
        w("")
        if checks:
            w("`btrfs check --readonly` of the images the ubtrfs daemon wrote (first "
              "repetition, after the unmount):")
            w("")
            w("| workload | target | result | detail |")
            w("|---|---|---|---|")
            for c in checks:
                wl, tgt, res, detail = (c + ["", "", "", ""])[:4]
                w(f"| {wl} | {tgt} | {'clean' if res == 'clean' else '**' + res + '**'} "
                  f"| {detail.replace('|', '/')} |")

    w("")
    w("## Every repetition")
    w("")
    w("| workload | target | values (in run order) | unit |")
    w("|---|---|---|---|")
    for wl in order:
        for tgt in TARGET_ORDER:
            c = cells[wl].get(tgt)
            if c and not (tgt == "fuse-passthrough" and wl in best):  # its own row has them
                w(f"| {wl} | {tgt} | {', '.join(fmt(v) for v in c.values)} | {c.unit} |")
    w("")

    with open(a.md, "w") as f:
        f.write("\n".join(out))
    with open(a.csv, "w", newline="") as f:
        cw = csv.writer(f, lineterminator="\n")
        cw.writerow(["workload", "target", "median", "min", "max", "unit"])
        cw.writerows(csv_rows)


if __name__ == "__main__":
    sys.exit(main())
