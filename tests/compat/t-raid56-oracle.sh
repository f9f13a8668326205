#!/bin/bash
# t-raid56-oracle: the kernel writes RAID5/RAID6 parity, ubtrfs's math agrees.
#
# For RAID5 on 3 devices and RAID6 on 3, 4 and 6 devices (data and metadata
# both): mkfs.btrfs, kernel mount, write files (a few MiB of noise, a small
# file and an append that leave partly written full stripes, text), unmount.
# Then, from `btrfs inspect-internal dump-tree -t chunk` (stripe devids and
# offsets) and `dump-super` (each image's devid), cut out every full stripe
# that holds file data, plus the first full stripes of every RAID5/6 chunk
# (metadata and system too), using the kernel's layout: full stripe n of a
# chunk rotates by n % num_stripes, data element i on stripe (i + n) % num,
# P on (ndata + n) % num, Q on (ndata + 1 + n) % num, each at
# stripe.offset + n * 64 KiB.  Each row goes to
#   test_raid56 --check-stripe raid5|raid6 D0 .. P [Q]
# which recomputes P and Q and rebuilds every 1- and 2-element loss.  The
# files' bytes are also read back through that layout (logical address ->
# data element) and compared, so the stripe order itself is checked.
#
# Needs root, loop devices, kernel btrfs, btrfs-progs, python3 and the
# test_raid56 binary ($TEST_RAID56, or $UBTRFS_BUILD_ROOT/tests/test_raid56).
set -euo pipefail

UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"

TR=${TEST_RAID56:-${UBTRFS_BUILD_ROOT:-$UBTRFS_SOURCE_ROOT/build}/tests/test_raid56}
oracle_require_kernel_btrfs
oracle_require_python
[[ -x $TR ]] || oracle_skip "needs the test_raid56 binary (\$TEST_RAID56 or \$UBTRFS_BUILD_ROOT/tests/test_raid56)"
oracle_init

T=$ORACLE_TMP
FAILS=0
CASES=0
SKIPPED=0

# run_case PROFILE NDEVS
run_case() {
	local prof=$1 ndev=$2 name=$1-$2 i
	local mnt=$T/mnt-$name
	local -a imgs=() devs=()
	CASES=$((CASES + 1))
	for ((i = 0; i < ndev; i++)); do
		imgs+=("$(oracle_image "$name-$i.img" 1G)")
	done
	if ! mkfs.btrfs -f -q -d "$prof" -m "$prof" "${imgs[@]}" >/dev/null 2>&1; then
		oracle_log "case $name: mkfs.btrfs -d $prof -m $prof on $ndev devices refused; skipped"
		SKIPPED=$((SKIPPED + 1))
		rm -f -- "${imgs[@]}"
		return 0
	fi
	if ! oracle_kmount "$mnt" "${imgs[@]}" 2>/dev/null; then
		oracle_log "case $name: the kernel does not mount it; skipped"
		SKIPPED=$((SKIPPED + 1))
		rm -f -- "${imgs[@]}"
		return 0
	fi
	oracle_log "case $name: $prof on $ndev devices"
	head -c $((3 * 1024 * 1024 + 12345)) /dev/urandom >"$mnt/noise"
	head -c 10000 /dev/urandom >"$mnt/small"
	seq 1 200000 >"$mnt/text"
	sync
	head -c 70000 /dev/urandom >>"$mnt/small"
	dd if=/dev/urandom of="$mnt/noise" bs=4096 seek=100 count=3 conv=notrunc status=none
	sync
	oracle_kumount "$mnt"

	# Expected contents, read back by the kernel.
	oracle_kmount -o ro "$mnt" "${imgs[@]}"
	mkdir -p "$T/expect-$name"
	cp "$mnt"/* "$T/expect-$name/"
	oracle_kumount "$mnt"

	# dump-tree needs every device of the filesystem visible.
	for i in "${imgs[@]}"; do
		devs+=("$(oracle_loop -r "$i")")
	done
	btrfs device scan "${devs[@]}" >/dev/null 2>&1 || true
	btrfs inspect-internal dump-tree -t chunk "${devs[0]}" >"$T/chunk-$name.txt"
	btrfs inspect-internal dump-tree -t 5 "${devs[0]}" >"$T/fs-$name.txt"
	for i in "${devs[@]}"; do
		oracle_unloop "$i"
	done
	: >"$T/devids-$name.txt"
	for i in "${imgs[@]}"; do
		printf '%s %s\n' \
			"$(btrfs inspect-internal dump-super "$i" | awk '$1 == "dev_item.devid" { print $2 }')" \
			"$i" >>"$T/devids-$name.txt"
	done

	if ! "$ORACLE_PYTHON" - "$TR" "$T/chunk-$name.txt" "$T/fs-$name.txt" \
		"$T/devids-$name.txt" "$T/expect-$name" "$T/rows-$name" "$name" <<'PY'; then
import os, re, subprocess, sys

tr, chunk_txt, fs_txt, devids_txt, expdir, rowdir, case = sys.argv[1:8]
STRIPE = 64 * 1024
os.makedirs(rowdir, exist_ok=True)

images = {}
for line in open(devids_txt):
    devid, path = line.split()
    images[int(devid)] = open(path, "rb")

def read_dev(devid, off, n):
    f = images[devid]
    f.seek(off)
    b = f.read(n)
    if len(b) != n:
        sys.exit(f"short read on devid {devid} at {off}")
    return b

# RAID5/6 chunks: start, length, type, stripes [(devid, offset)].
chunks, cur = [], None
for line in open(chunk_txt):
    m = re.search(r"key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\)", line)
    if m:
        cur = {"start": int(m.group(1)), "stripes": []}
        chunks.append(cur)
        continue
    if cur is None:
        continue
    m = re.match(r"\s+length (\d+) owner \d+ stripe_len (\d+) type (\S+)", line)
    if m:
        cur.update(length=int(m.group(1)), stripe_len=int(m.group(2)), type=m.group(3))
        continue
    m = re.match(r"\s+num_stripes (\d+)", line)
    if m:
        cur["num"] = int(m.group(1))
        continue
    m = re.match(r"\s+stripe (\d+) devid (\d+) offset (\d+)", line)
    if m:
        cur["stripes"].append((int(m.group(2)), int(m.group(3))))
chunks = [c for c in chunks if re.search(r"RAID[56]", c.get("type", ""))]
if not chunks:
    sys.exit("no RAID5/6 chunks found")
for c in chunks:
    c["np"] = 2 if "RAID6" in c["type"] else 1
    c["nd"] = c["num"] - c["np"]
    if c["stripe_len"] != STRIPE or len(c["stripes"]) != c["num"]:
        sys.exit(f"chunk {c['start']}: unexpected layout")

def chunk_of(logical):
    for c in chunks:
        if c["start"] <= logical < c["start"] + c["length"]:
            return c
    sys.exit(f"logical {logical} is in no RAID5/6 chunk")

def element_loc(c, n, k):
    """Device and offset of element k (data 0..nd-1, then P, Q) of full stripe n."""
    devid, off = c["stripes"][(k + n) % c["num"]]
    return devid, off + n * STRIPE

def read_logical(logical, n):
    out = b""
    while n:
        c = chunk_of(logical)
        rel = logical - c["start"]
        full = rel // (c["nd"] * STRIPE)
        within = rel % (c["nd"] * STRIPE)
        k, o = within // STRIPE, within % STRIPE
        take = min(n, STRIPE - o)
        devid, off = element_loc(c, full, k)
        out += read_dev(devid, off + o, take)
        logical += take
        n -= take
    return out

# File extents (no compression here): check the bytes through our layout.
names, extents, item = {}, [], None
for line in open(fs_txt):
    m = re.match(r"\s+item \d+ key \((\d+) (\w+) (\d+)\)", line)
    if m:
        item = {"ino": int(m.group(1)), "type": m.group(2), "key_off": int(m.group(3))}
        if item["type"] == "EXTENT_DATA":
            extents.append(item)
        continue
    if item is None:
        continue
    m = re.search(r"index \d+ namelen \d+ name: (.*)$", line)
    if m and item["type"] == "INODE_REF":
        names.setdefault(item["ino"], m.group(1))
    m = re.search(r"extent data disk byte (\d+) nr (\d+)", line)
    if m:
        item.update(bytenr=int(m.group(1)), disk_nr=int(m.group(2)))
    m = re.search(r"extent data offset (\d+) nr (\d+) ram (\d+)", line)
    if m:
        item.update(offset=int(m.group(1)), nr=int(m.group(2)))

fails = 0
rows = set()
checked_bytes = 0
for e in extents:
    if not e.get("bytenr"):
        continue
    name = names.get(e["ino"], "?")
    want = open(os.path.join(expdir, name), "rb").read()[e["key_off"]:e["key_off"] + e["nr"]]
    logical = e["bytenr"] + e["offset"]
    got = read_logical(logical, len(want))
    if got != want:
        print(f"FAIL {name} key {e['key_off']}: bytes at logical {logical} differ from the file")
        fails += 1
    checked_bytes += len(want)
    # Every full stripe the extent touches.
    c = chunk_of(e["bytenr"])
    fs = c["nd"] * STRIPE
    first = (e["bytenr"] - c["start"]) // fs
    last = (e["bytenr"] + e["disk_nr"] - 1 - c["start"]) // fs
    for n in range(first, last + 1):
        rows.add((c["start"], n))
if checked_bytes == 0:
    print("FAIL: no file extents found")
    fails += 1
# And the first full stripes of every chunk (metadata and system too).
for c in chunks:
    for n in range(min(4, c["length"] // (c["nd"] * STRIPE))):
        rows.add((c["start"], n))

byid = {c["start"]: c for c in chunks}
for start, n in sorted(rows):
    c = byid[start]
    files = []
    for k in range(c["num"]):
        devid, off = element_loc(c, n, k)
        p = os.path.join(rowdir, f"{start}-{n}-{k}")
        with open(p, "wb") as f:
            f.write(read_dev(devid, off, STRIPE))
        files.append(p)
    prof = "raid6" if c["np"] == 2 else "raid5"
    r = subprocess.run([tr, "--check-stripe", prof] + files, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL {c['type']} chunk {start} full stripe {n}: {r.stderr.strip()}")
        fails += 1
    for p in files:
        os.unlink(p)

print(f"{case}: {len(rows)} full stripes in {len(chunks)} RAID5/6 chunks checked, "
      f"{checked_bytes} file bytes read through the layout, {fails} failed")
sys.exit(1 if fails else 0)
PY
		printf 'FAIL: case %s\n' "$name"
		FAILS=$((FAILS + 1))
	fi
	rm -rf -- "${imgs[@]}" "$T/expect-$name" "$T/rows-$name"
}

run_case raid5 3
run_case raid5 5
run_case raid6 3
run_case raid6 4
run_case raid6 6

if ((FAILS)); then
	printf 'FAIL: %d of %d cases failed (%d not possible here)\n' "$FAILS" "$CASES" "$SKIPPED"
	exit 1
fi
printf 'PASS: %d cases (%d not possible here)\n' "$CASES" "$SKIPPED"
exit 0
