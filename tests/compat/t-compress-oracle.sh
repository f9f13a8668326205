#!/bin/bash
# t-compress-oracle: the kernel compresses, ubtrfs decompresses.
#
# For each algorithm (zlib, lzo, zstd, at several levels) and each sector size
# the kernel mounts here: mkfs.btrfs, kernel-mount with -o compress-force=ALG,
# write known files (text of 200 KiB and 1 MiB, zeros, text/noise mixes,
# small inline-sized files, an extent split by an overwrite so that file
# extent items reference part of it, appends), unmount, and read the files
# back through a read-only kernel mount as the expected contents.  Then every
# compressed EXTENT_DATA item listed by `btrfs inspect-internal dump-tree`
# is located in the image (chunk tree stripe 0 for single/DUP profiles; for
# inline extents, the item's bytes inside its leaf) and decompressed by
# `test_compress --decompress` — the whole extent, and the item's
# [offset, offset+num_bytes) range — and compared with the file.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, python3 and the
# test_compress binary ($TEST_COMPRESS, or $UBTRFS_BUILD_ROOT/tests/test_compress).
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

TC=${TEST_COMPRESS:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/test_compress}
oracle_require_kernel_btrfs
oracle_require_python
[[ -x $TC ]] || oracle_skip "needs the test_compress binary (\$TEST_COMPRESS or \$UBTRFS_BUILD_ROOT/tests/test_compress)"
oracle_init

T=$ORACLE_TMP
FAILS=0
CASES=0
SKIPPED=0

# Deterministic file contents, made once.
mkdir -p "$T/src"
"$ORACLE_PYTHON" - "$T/src" <<'PY'
import os, random, sys
d = sys.argv[1]
rng = random.Random(20240611)
words = ["btrfs", "extent", "compressed", "sector", "the", "kernel", "leaf",
         "node", "checksum", "subvolume", "a", "of", "and", "snapshot", "tree",
         "inode", "zstd", "lzo", "zlib", "chunk", "stripe", "device"]
def text(n):
    out = []
    size = 0
    while size < n:
        w = rng.choice(words) + rng.choice([" ", " ", " ", ", ", ".\n"])
        out.append(w)
        size += len(w)
    return "".join(out).encode()[:n]
def noise(n):
    return bytes(rng.getrandbits(8) for _ in range(n))
def put(name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
put("text-200k", text(200 * 1024))
put("text-1m", text(1024 * 1024))
put("zeros-300k", bytes(300 * 1024))
put("mixed-256k", b"".join(noise(8192) if i % 2 else text(8192) for i in range(32)))
put("tail-130001", text(130001))
put("inline-3000", text(3000))
put("inline-700", text(700))
put("inline-zeros-4000", bytes(4000))
put("split-base", text(200 * 1024))
put("split-patch", noise(4096))
put("split-patch2", text(100))
# LZO: each 128 KiB extent starts with a sector of t zeros then noise, whose
# LZO1X output (about 4125 - t bytes) ends in the last 1..3 bytes of the
# first sector for t near 40, so the next segment header must skip to the
# next sector; the other 31 sectors are zeros (the extent still compresses).
put("lzo-pad", b"".join(bytes(t) + noise(4096 - t) + bytes(31 * 4096) for t in range(36, 45)))
put("append-a", text(10000))
put("append-b", text(10000))
PY

# run_case NAME SECTORSIZE MOUNT_OPTS
run_case() {
	local name=$1 ss=$2 opts=$3
	local img=$T/$name.img mnt=$T/mnt-$name exp=$T/expect-$name
	CASES=$((CASES + 1))
	rm -f -- "$img"
	truncate -s 512M -- "$img"
	if ! mkfs.btrfs -f -q -s "$ss" "$img" >/dev/null 2>&1; then
		oracle_log "case $name: mkfs.btrfs -s $ss not possible here; skipped"
		SKIPPED=$((SKIPPED + 1))
		rm -f -- "$img"
		return 0
	fi
	if ! oracle_kmount -o "$opts" "$mnt" "$img" 2>/dev/null; then
		oracle_log "case $name: the kernel does not mount -s $ss -o $opts here; skipped"
		SKIPPED=$((SKIPPED + 1))
		rm -f -- "$img"
		return 0
	fi
	oracle_log "case $name: sectorsize $ss, -o $opts"
	local s=$T/src
	cp "$s/text-200k" "$s/text-1m" "$s/zeros-300k" "$s/mixed-256k" "$s/tail-130001" \
		"$s/inline-3000" "$s/inline-700" "$s/inline-zeros-4000" "$s/lzo-pad" "$mnt/"
	cp "$s/split-base" "$mnt/split"
	cp "$s/append-a" "$mnt/append"
	sync
	# Partial references: overwrite inside the first extent, and a tiny one.
	dd if="$s/split-patch" of="$mnt/split" bs=4096 seek=2 conv=notrunc status=none
	dd if="$s/split-patch2" of="$mnt/split" bs=1 seek=150000 conv=notrunc status=none
	cat "$s/append-b" >>"$mnt/append"
	sync
	oracle_kumount "$mnt"

	# What the kernel reads back from disk is the expected content.
	oracle_kmount -o ro "$mnt" "$img"
	mkdir -p "$exp"
	cp "$mnt"/* "$exp/"
	oracle_kumount "$mnt"

	if ! "$ORACLE_PYTHON" - "$img" "$TC" "$exp" "$ss" "$name" <<'PY'; then
import os, re, subprocess, sys

img, tc, expdir, ss, case = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
LEAF_HEADER = 101        # struct btrfs_header
INLINE_START = 21        # file extent item bytes before inline data

def dump(tree):
    return subprocess.run(["btrfs", "inspect-internal", "dump-tree", "-t", tree, img],
                          check=True, capture_output=True, text=True).stdout

# Chunk map: logical start, length, stripe 0's physical offset (single/DUP).
chunks, cur = [], None
for line in dump("chunk").splitlines():
    m = re.search(r"key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\)", line)
    if m:
        cur = {"start": int(m.group(1))}
        chunks.append(cur)
        continue
    if cur is None:
        continue
    m = re.match(r"\s+length (\d+) owner \d+ stripe_len \d+ type (\S+)", line)
    if m and "length" not in cur:
        cur["length"], cur["type"] = int(m.group(1)), m.group(2)
        continue
    m = re.match(r"\s+stripe 0 devid \d+ offset (\d+)", line)
    if m and "phys" not in cur:
        cur["phys"] = int(m.group(1))

def physical(logical):
    for c in chunks:
        if c["start"] <= logical < c["start"] + c["length"]:
            if not re.search(r"single|DUP", c["type"]):
                sys.exit(f"chunk at {c['start']} is {c['type']}, not single/DUP")
            return c["phys"] + logical - c["start"]
    sys.exit(f"no chunk maps logical {logical}")

with open(img, "rb") as f:
    image = f.read()

names, extents = {}, []
leaf = item = None
for line in dump("5").splitlines():
    m = re.match(r"(?:leaf|node) (\d+) (?:items|level)", line)
    if m:
        leaf = int(m.group(1))
        continue
    m = re.match(r"\s+item \d+ key \((\d+) (\w+) (\d+)\) itemoff (\d+) itemsize (\d+)", line)
    if m:
        item = {"ino": int(m.group(1)), "type": m.group(2), "key_off": int(m.group(3)),
                "itemoff": int(m.group(4)), "itemsize": int(m.group(5)), "leaf": leaf}
        if item["type"] == "EXTENT_DATA":
            extents.append(item)
        continue
    if item is None:
        continue
    if item["type"] == "INODE_REF":
        m = re.search(r"name: (.*)$", line)
        if m and item["ino"] not in names:
            names[item["ino"]] = m.group(1)
    elif item["type"] == "EXTENT_DATA":
        m = re.search(r"inline extent data size (\d+) ram_bytes (\d+) compression (\d+)", line)
        if m:
            item.update(kind="inline", size=int(m.group(1)), ram=int(m.group(2)),
                        comp=int(m.group(3)))
        m = re.search(r"extent data disk byte (\d+) nr (\d+)", line)
        if m:
            item.update(kind="regular", bytenr=int(m.group(1)), disk_nr=int(m.group(2)))
        m = re.search(r"extent data offset (\d+) nr (\d+) ram (\d+)", line)
        if m:
            item.update(offset=int(m.group(1)), nr=int(m.group(2)), ram=int(m.group(3)))
        m = re.search(r"extent compression (\d+)", line)
        if m:
            item["comp"] = int(m.group(1))

def lzo_walk(data):
    """Segments and padding skips of an LZO (btrfs framing) stream."""
    le32 = lambda o: int.from_bytes(data[o:o + 4], "little")
    total, cur, segs, pads = le32(0), 4, 0, 0
    while cur + 4 <= min(total, len(data)):
        cur += 4 + le32(cur)
        segs += 1
        left = ss - cur % ss
        if left < 4:
            pads += 1
            cur += left
    return segs, pads

def decompress(comp, data, args):
    r = subprocess.run([tc, "--decompress", str(comp), str(ss)] + [str(a) for a in args],
                       input=data, capture_output=True)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace").strip()

fails = 0
counts = {"regular": 0, "partial": 0, "inline": 0, "lzo": 0, "segs": 0, "pads": 0}
for e in extents:
    if e.get("comp", 0) == 0 or e.get("kind") is None:
        continue
    if e["kind"] == "regular" and e["bytenr"] == 0:
        continue
    name = names.get(e["ino"], f"ino{e['ino']}")
    with open(os.path.join(expdir, name), "rb") as f:
        want_file = f.read()
    if e["kind"] == "inline":
        if e["itemsize"] != INLINE_START + e["size"]:
            print(f"{name}: inline item size {e['itemsize']} != 21 + {e['size']}")
            fails += 1
            continue
        at = physical(e["leaf"]) + LEAF_HEADER + e["itemoff"] + INLINE_START
        data = image[at:at + e["size"]]
        ranges = [(0, e["ram"], 0)]
        label = f"inline {e['size']}->{e['ram']}"
        counts["inline"] += 1
    else:
        at = physical(e["bytenr"])
        data = image[at:at + e["disk_nr"]]
        # The whole extent (no file comparison beyond the item) and the item.
        ranges = [(e["offset"], e["nr"], e["key_off"])]
        label = (f"regular {e['disk_nr']}->{e['ram']} @{e['bytenr']} "
                 f"off {e['offset']} nr {e['nr']}")
        counts["regular"] += 1
        if e["offset"] or e["nr"] != e["ram"]:
            counts["partial"] += 1
        rc, out, err = decompress(e["comp"], data, [e["ram"]])
        if rc != 0 or len(out) != e["ram"]:
            print(f"FAIL {name} key {e['key_off']}: {label}: whole decode: rc {rc}: {err}")
            fails += 1
            continue
        # The kernel compresses only up to end of file as it was then
        # (ram_bytes is rounded up to the sector), so the stream may end
        # early; it must cover every file byte the item references.
        m = re.search(r"(\d+) of (\d+) bytes out", err)
        real = int(m.group(1)) if m else -1
        need = min(e["offset"] + e["nr"], len(want_file) - (e["key_off"] - e["offset"]))
        if real < need:
            print(f"FAIL {name} key {e['key_off']}: {label}: decoded {real} bytes, "
                  f"the file needs {need}: {err}")
            fails += 1
    if e["comp"] == 2:
        segs, pads = lzo_walk(data)
        counts["lzo"] += 1
        counts["segs"] += segs
        counts["pads"] += pads
    for skip, length, file_off in ranges:
        rc, out, err = decompress(e["comp"], data, [e["ram"], skip, length])
        want = want_file[file_off:file_off + length]
        # Bytes of the extent past end of file are zeros.
        want += bytes(length - len(want))
        if rc != 0 or out != want:
            where = next((i for i in range(min(len(out), len(want))) if out[i] != want[i]),
                         min(len(out), len(want)))
            print(f"FAIL {name} key {e['key_off']}: {label}: rc {rc} ({err}); "
                  f"{len(out)} bytes, first difference at {where}")
            fails += 1
        else:
            print(f"ok   {name} key {e['key_off']}: {label}")

print(f"{case}: {counts['regular']} regular ({counts['partial']} partly referenced), "
      f"{counts['inline']} inline compressed extents checked, {fails} failed")
if counts["lzo"]:
    print(f"{case}: LZO framing: {counts['segs']} segments, {counts['pads']} header "
          f"paddings to the next sector")
    if counts["pads"] == 0:
        print(f"FAIL {case}: no LZO segment header had to skip to the next sector "
              f"(lzo-pad was made for that)")
        fails += 1
if counts["regular"] < 10 or counts["partial"] < 2 or counts["inline"] < 2:
    print(f"FAIL {case}: too few compressed extents found (is compress-force working?)")
    fails += 1
sys.exit(1 if fails else 0)
PY
		printf 'FAIL: case %s\n' "$name"
		FAILS=$((FAILS + 1))
	fi
	rm -rf -- "$img" "$exp"
}

for ss in 4096 16384 65536; do
	run_case "zlib-$ss" "$ss" compress-force=zlib
	run_case "lzo-$ss" "$ss" compress-force=lzo
	run_case "zstd-$ss" "$ss" compress-force=zstd
done
run_case zlib1 4096 compress-force=zlib:1
run_case zlib9 4096 compress-force=zlib:9
run_case zstd1 4096 compress-force=zstd:1
run_case zstd15 4096 compress-force=zstd:15
run_case zstd-neg5 4096 compress-force=zstd:-5

if ((FAILS)); then
	printf 'FAIL: %d of %d cases failed (%d not possible on this kernel)\n' "$FAILS" "$CASES" "$SKIPPED"
	exit 1
fi
printf 'PASS: %d cases (%d not possible on this kernel)\n' "$CASES" "$SKIPPED"
exit 0
