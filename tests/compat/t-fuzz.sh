#!/usr/bin/env bash
# Fuzz harnesses over seeds cut from the crafted images (tests/images):
# superblocks, tree blocks (every 4 KiB block whose header carries the
# image's fsid) and raw data sectors.  Always replays the seeds through the
# standalone drivers of this build (so the sanitizer build checks them too);
# when UBTRFS_FUZZ_BUILD names a build with libFuzzer binaries (meson
# -Dfuzzers=true, clang), also runs each fuzzer for UBTRFS_FUZZ_SECONDS
# (default 15) seconds from those seeds.  Needs no root.
set -euo pipefail
UBTRFS_SOURCE_ROOT=${UBTRFS_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd -P)}
# shellcheck source=lib.sh
. "$UBTRFS_SOURCE_ROOT/tests/compat/lib.sh"
oracle_require_cmd xz python3
oracle_init
BUILD=${UBTRFS_BUILD_ROOT:?UBTRFS_BUILD_ROOT is not set}
seeds=$ORACLE_TMP/seeds
mkdir -p "$seeds/super" "$seeds/tree_block" "$seeds/decompress"

n=0
while IFS=$'\t' read -r path expect _; do
	[ "$path" = path ] && continue
	case "$path" in *.stream.xz) continue ;; esac
	raw=$ORACLE_TMP/img.raw
	if ! (oracle_unpack "$(oracle_shared_images)/$path" "$raw") >/dev/null 2>&1; then
		continue
	fi
	n=$((n + 1))
	python3 - "$raw" "$seeds" "$n" <<'PY'
import os, sys
raw, seeds, n = sys.argv[1], sys.argv[2], sys.argv[3]
with open(raw, 'rb') as f:
    f.seek(65536)
    sb = f.read(4096)
    if len(sb) == 4096:
        open(os.path.join(seeds, 'super', n), 'wb').write(sb)
    fsid = sb[32:48] if len(sb) == 4096 else None
    size = os.fstat(f.fileno()).st_size
    taken = 0
    # Tree blocks: scan the first 64 MiB for headers with our fsid (in
    # 4 MiB pieces; holes skipped).
    end = min(size, 64 << 20)
    pos = 0
    while fsid and pos < end and taken < 24:
        try:
            pos = os.lseek(f.fileno(), pos, os.SEEK_DATA) & ~4095
        except OSError:
            break
        if pos >= end:
            break
        f.seek(pos)
        chunk = f.read(min(4 << 20, end - pos))
        if len(chunk) < 4096:
            break
        for o in range(0, len(chunk) - 4095, 4096):
            if chunk[o + 32:o + 48] == fsid and pos + o != 65536:
                open(os.path.join(seeds, 'tree_block', '%s-%d' % (n, pos + o)), 'wb').write(
                    chunk[o:o + 4096])
                taken += 1
                if taken >= 24:
                    break
        pos += len(chunk)
    # A few data-ish sectors for the decompressors (type byte first).
    for i, off in enumerate((1 << 20, 13 << 20, 20 << 20)):
        f.seek(off)
        b = f.read(4096)
        if b and any(b):
            open(os.path.join(seeds, 'decompress', '%s-%d' % (n, i)), 'wb').write(bytes([i % 4]) + b)
PY
	rm -f "$raw"
done < "$(oracle_shared_images)/expect.tsv"
oracle_log "seeds from $n images: $(ls "$seeds/super" | wc -l) superblocks, $(ls "$seeds/tree_block" | wc -l) tree blocks, $(ls "$seeds/decompress" | wc -l) data sectors"

status=0
for h in super tree_block decompress; do
	bin=$BUILD/tests/fuzz/fuzzreplay_$h
	[ -x "$bin" ] || oracle_fail "missing $bin"
	# shellcheck disable=SC2012
	if ! find "$seeds/$h" -type f -print0 | xargs -0 -r timeout 300 "$bin" 2>"$ORACLE_TMP/$h.err"; then
		echo "FAIL: replay of $h seeds crashed:"; tail -20 "$ORACLE_TMP/$h.err"; status=1
	fi
	if grep -qE 'AddressSanitizer|runtime error:' "$ORACLE_TMP/$h.err"; then
		echo "FAIL: sanitizer report in $h replay"; grep -m5 -E 'ERROR|runtime error' "$ORACLE_TMP/$h.err"; status=1
	fi
done

if [ -n "${UBTRFS_FUZZ_BUILD:-}" ]; then
	secs=${UBTRFS_FUZZ_SECONDS:-15}
	for h in super tree_block decompress; do
		bin=$UBTRFS_FUZZ_BUILD/tests/fuzz/fuzz_$h
		[ -x "$bin" ] || oracle_fail "UBTRFS_FUZZ_BUILD has no $bin"
		corpus=$ORACLE_TMP/corpus-$h
		cp -r "$seeds/$h" "$corpus"
		if ! (cd "$ORACLE_TMP" && "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
			"$corpus" >"$ORACLE_TMP/lf-$h.log" 2>&1); then
			echo "FAIL: libFuzzer found a problem in $h:"; tail -30 "$ORACLE_TMP/lf-$h.log"; status=1
		else
			oracle_log "fuzz_$h: $(grep -Eo '#[0-9]+' "$ORACLE_TMP/lf-$h.log" | tail -1) runs, no findings"
		fi
	done
fi
exit $status
