#!/usr/bin/env bash
# The packed-weight cache file (runtime/packcache.h): written on the first load, mapped on the next
# with the same logits (and moved into memory by --pack-cache move, the same again), rebuilt when
# the model or the file changed, never a failed run when it cannot be used, no temporary file
# left behind, and really the data decode computes from.
# usage: test_pack_cache.sh BIN_DIR SHARED_DIR FAULT_LIB
set -u
bin=$1; shared=$2; fault=$3; d=$bin/decode
# A sanitizer's runtime wants to come first; the fault library only wraps two libc calls.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
holder=
tmp=$(mktemp -d); trap '[ -n "$holder" ] && kill $holder 2>/dev/null; rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME=$tmp/cache
dir=$XDG_CACHE_HOME/decode/packed
export DECODE_PACK_CACHE=auto         # the default too; checked at the end without the variable
cases=0; fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# run STATUS WHAT DUMP -- command...: the exit status, and the logits dump equal to the reference.
run() {
  local want=$1 what=$2 dump=$3; shift 4
  cases=$((cases + 1))
  "$@" >"$tmp/out" 2>"$tmp/err"; st=$?
  [ "$st" = "$want" ] || { fail "$what: exit $st, want $want: $(head -c 400 "$tmp/err")"; return 1; }
  [ "$dump" = - ] || cmp -s "$dump" "$ref" || { fail "$what: logits differ from the packed-in-memory run"; return 1; }
  return 0
}
has() { grep -q -- "$1" "$tmp/err" || fail "$2: stderr lacks '$1': $(head -c 400 "$tmp/err")"; }
packs() { ls "$dir" 2>/dev/null | grep -c '\.pack$'; }
# stop_at PHASE command...: starts it in the background (pid) and returns once it has stopped at
# PHASE (DECODE_TEST_STOP); the caller then continues it with kill -CONT.
stop_at() {
  local phase=$1; shift
  DECODE_TEST_STOP=$phase "$@" >"$tmp/out" 2>"$tmp/err" & pid=$!
  local st
  for ((i = 0; i < 2400; i++)); do
    st=$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)
    [ "$st" = T ] && return
    [ -z "$st" ] || [ "$st" = Z ] && break; sleep 0.05   # it ended without stopping
  done
  fail "never stopped at $phase: $(head -c 300 "$tmp/err")"
  kill -KILL $pid 2>/dev/null   # the caller's kill -CONT and wait then end at once
}
temps() { ls -A "$dir" 2>/dev/null | grep -c tmp; }

# Big enough (6 MB a step) that -t 2 gives both threads work.
"$bin/gguf-synth" "$tmp/f16.gguf" --n-embd 256 --n-layer 4 --n-head 4 --n-kv-head 2 --n-ff 768 \
  --n-vocab 2000 --ctx 64 --dtype f16 --seed 3 >/dev/null || { echo "FAIL: gguf-synth"; exit 1; }
cp "$shared/testdata/models/stories260K.gguf" "$tmp/s260.gguf"
for model in "$tmp/s260.gguf" "$tmp/f16.gguf"; do
  rm -rf "$XDG_CACHE_HOME"
  args=(-m "$model" -p "Once upon a time" -n 12 --temp 0)
  ref=$tmp/ref.bin
  run 0 "off" - -- "$d" "${args[@]}" --pack-cache off --dump-logits "$ref" || continue
  [ "$(packs)" = 0 ] || fail "off wrote a cache file"
  run 0 "first load" "$tmp/a.bin" -- "$d" "${args[@]}" --dump-logits "$tmp/a.bin" && has "packed weights saved to" "first load" &&
    { grep -q "packed-weight cache:" "$tmp/err" && fail "first load left a note: $(grep packed-weight "$tmp/err")"; }
  [ "$(packs)" = 1 ] || fail "first load: $(packs) cache files"
  pack=$(ls "$dir"/*.pack)
  run 0 "second load" "$tmp/b.bin" -- "$d" "${args[@]}" -v --dump-logits "$tmp/b.bin" && has "mapped from $pack" "second load"
  grep -q "saved to" "$tmp/err" && fail "second load wrote the cache again"
  grep -q "checksum" "$tmp/err" && fail "second load read the file against its checksum: $(grep checksum "$tmp/err")"
  [ "$(stat -c %a "$pack")" = 600 ] || fail "cache file mode $(stat -c %a "$pack"), want 600"
  for t in 1 2 3; do run 0 "mapped, -t $t" "$tmp/t.bin" -- "$d" "${args[@]}" -t $t -v --dump-logits "$tmp/t.bin" && has "mapped from" "-t $t"; done
  run 0 "mapped, -b 1" "$tmp/t.bin" -- "$d" "${args[@]}" -b 1 -v --dump-logits "$tmp/t.bin" && has "mapped from" "-b 1"
  # Moved into memory a layer a step (--pack-cache move): the same logits at any thread count and
  # batch, and once moved the file can go (nothing reads it); mapped, the same cut is a clean
  # error (below).
  for t in 1 2 3; do
    run 0 "move, -t $t" "$tmp/t.bin" -- "$d" "${args[@]}" -t $t --pack-cache move -v --dump-logits "$tmp/t.bin" && has "moving them into memory" "move"
  done
  run 0 "move, -b 1" "$tmp/t.bin" -- "$d" "${args[@]}" -b 1 --pack-cache move --dump-logits "$tmp/t.bin"
  cases=$((cases + 1)); cp "$pack" "$tmp/pack.keep"
  stop_at moved "$d" "${args[@]}" --pack-cache move -v --dump-logits "$tmp/mv.bin"
  : >"$pack"; kill -CONT $pid; wait $pid; st=$?
  [ "$st" = 0 ] && cmp -s "$tmp/mv.bin" "$ref" && grep -q "stopped at moved" "$tmp/err" && has "moving them into memory" "moved" ||
    fail "cache file emptied after the weights moved: exit $st: $(tail -c 300 "$tmp/err")"
  cp "$tmp/pack.keep" "$pack"
  run 0 "DECODE_PACK_CACHE=off" "$tmp/t.bin" -- env DECODE_PACK_CACHE=off "$d" "${args[@]}" -v --dump-logits "$tmp/t.bin" &&
    grep -q "mapped from" "$tmp/err" && fail "DECODE_PACK_CACHE=off still mapped"
  # A body written to after the cache was (its modification time moved on): read whole against
  # its checksum, rebuilt where that differs, the same logits; only touched, kept and read once.
  touch "$pack"                        # the copy above made it so already
  run 0 "touched" "$tmp/t.bin" -- "$d" "${args[@]}" -v --dump-logits "$tmp/t.bin" && has "mapped from" "touched" &&
    has "its modification time is not the one its writer set (written to, touched or copied since): read whole, it matches its checksum" "touched"
  touch "$pack"                        # read by three threads now, written by two: the same checksum
  run 0 "touched, -t 3" "$tmp/t.bin" -- "$d" "${args[@]}" -t 3 -v --dump-logits "$tmp/t.bin" && has "mapped from" "-t 3" &&
    has "read whole, it matches its checksum" "touched, -t 3"
  run 0 "touched, read once" "$tmp/t.bin" -- "$d" "${args[@]}" -v --dump-logits "$tmp/t.bin" && has "mapped from" "read once" &&
    { grep -q checksum "$tmp/err" && fail "touched, read once: read again: $(grep checksum "$tmp/err")"; }
  cp -p "$pack" "$tmp/pack.orig"       # its time too: the stamp its writer set
  printf '\x3c\x3c\x3c\x3c\x3c\x3c\x3c\x3c' | dd of="$pack" bs=1 seek=$((8192 + 64)) conv=notrunc status=none
  run 0 "damaged body" "$tmp/t.bin" -- "$d" "${args[@]}" --dump-logits "$tmp/t.bin" &&
    has "the cache file was modified after it was written and its checksum differs" "damaged body" &&
    has "saved to" "damaged body"
  printf '\x3c' | dd of="$pack" bs=1 seek=$(($(stat -c %s "$pack") - 1)) conv=notrunc status=none   # its last byte
  run 0 "damaged end" "$tmp/t.bin" -- "$d" "${args[@]}" --dump-logits "$tmp/t.bin" &&
    has "the cache file was modified after it was written and its checksum differs" "damaged end"
  cp -p "$tmp/pack.orig" "$pack"
  # Wrong numbers from a damaged body whose time was put back (a deliberate utimensat: not read
  # whole), not a crash: and proof the mapped bytes are what runs. Finite damage runs on with
  # other logits; NaNs, which reach every logit, stop decode at the first token with its one-line
  # reason (exit 1).
  printf '\x3c\x3c\x3c\x3c\x3c\x3c\x3c\x3c' | dd of="$pack" bs=1 seek=$((8192 + 64)) conv=notrunc status=none
  touch -r "$tmp/pack.orig" "$pack"
  run 0 "damaged body, time put back" - -- "$d" "${args[@]}" --dump-logits "$tmp/dmg.bin"
  cmp -s "$tmp/dmg.bin" "$ref" && fail "damaged body: same logits (is the cache file read at all?)"
  printf '\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f' | dd of="$pack" bs=1 seek=$((8192 + 64)) conv=notrunc status=none
  touch -r "$tmp/pack.orig" "$pack"
  run 1 "NaN-damaged body" - -- "$d" "${args[@]}" && has "are all NaN or -inf" "NaN-damaged body"
  cp -p "$tmp/pack.orig" "$pack"
  # A header that does not match, a short file, a touched model: rebuilt, same logits.
  printf 'XXXX' | dd of="$pack" bs=1 seek=0 conv=notrunc status=none
  run 0 "damaged header" "$tmp/t.bin" -- "$d" "${args[@]}" --dump-logits "$tmp/t.bin" && has "saved to" "damaged header"
  truncate -s -4096 "$pack"
  run 0 "short file" "$tmp/t.bin" -- "$d" "${args[@]}" --dump-logits "$tmp/t.bin" && has "saved to" "short file"
  touch -d "2001-01-01" "$model"
  run 0 "model touched" "$tmp/t.bin" -- "$d" "${args[@]}" --dump-logits "$tmp/t.bin" && has "saved to" "model touched"
  run 0 "rebuild" "$tmp/t.bin" -- "$d" "${args[@]}" --pack-cache rebuild --dump-logits "$tmp/t.bin" && has "saved to" "rebuild"
  [ "$(packs)" = 1 ] || fail "rebuilds left $(packs) cache files"
  # A temporary file nobody holds (its writer died) is removed by the next writer; a held one is kept.
  : >"$pack.tmp999999999"; : >"$tmp/held"
  # The holder is the sleep itself (the lock on its fd 9), so killing it frees the lock and leaves
  # no process behind holding the test's output (the EXIT trap kills it too; its 600 s outlast any
  # slow run here). Held, not only there: the file is created before it is locked, and a decode
  # that looked between the two would rightly remove it (wait up to 30 s: a loaded CI machine).
  ( exec 9>"$dir/other.pack.tmp1"; flock 9; exec sleep 600 ) </dev/null >/dev/null 2>&1 & holder=$!
  for ((i = 0; i < 600; i++)); do
    [ -e "$dir/other.pack.tmp1" ] && ! flock -n "$dir/other.pack.tmp1" true && break; sleep 0.05
  done
  [ "$i" -lt 600 ] || fail "the holder did not lock $dir/other.pack.tmp1 in 30 s"
  run 0 "orphan" "$tmp/t.bin" -- "$d" "${args[@]}" --pack-cache rebuild --dump-logits "$tmp/t.bin"
  [ -e "$pack.tmp999999999" ] && fail "an orphaned temporary file was kept"
  [ -e "$dir/other.pack.tmp1" ] || fail "a held temporary file was removed"
  kill $holder; wait $holder 2>/dev/null; holder=; rm -f "$dir/other.pack.tmp1"
  # The model replaced by a rename, and another model deleted: their old files go.
  cp "$model" "$tmp/copy.gguf"
  run 0 "a second model" - -- "$d" -m "$tmp/copy.gguf" -p "Once upon a time" -n 1 --temp 0
  [ "$(packs)" = 2 ] || fail "a second model: $(packs) cache files, want 2"
  rm "$tmp/copy.gguf"; cp "$model" "$tmp/m2.gguf"; mv "$tmp/m2.gguf" "$model"
  run 0 "model renamed over" "$tmp/t.bin" -- "$d" "${args[@]}" --dump-logits "$tmp/t.bin" && has "saved to" "model renamed over"
  [ "$(packs)" = 1 ] || fail "after a rename and a delete: $(packs) cache files, want 1"
  # A model that cannot be looked at (a symlink loop where its folder was: ELOOP, even for root)
  # is not a gone one: its cache file stays through another model's write, and maps once it is back.
  mkdir "$tmp/sub"; cp "$model" "$tmp/sub/hid.gguf"
  run 0 "a hidden model" - -- "$d" -m "$tmp/sub/hid.gguf" -p "Once upon a time" -n 1 --temp 0
  mv "$tmp/sub" "$tmp/sub.away"; ln -s sub "$tmp/sub"
  run 0 "model hidden" "$tmp/t.bin" -- "$d" "${args[@]}" --pack-cache rebuild --dump-logits "$tmp/t.bin"
  [ "$(packs)" = 2 ] || fail "a model behind a symlink loop lost its cache file: $(packs) left, want 2"
  rm "$tmp/sub"; mv "$tmp/sub.away" "$tmp/sub"
  run 0 "model back" - -- "$d" -m "$tmp/sub/hid.gguf" -p "Once upon a time" -n 1 --temp 0 -v && has "mapped from" "model back"
  rm -rf "$tmp/sub"
  run 0 "hidden model deleted" "$tmp/t.bin" -- "$d" "${args[@]}" --pack-cache rebuild --dump-logits "$tmp/t.bin"
  [ "$(packs)" = 1 ] || fail "after the hidden model's delete: $(packs) cache files, want 1"
  # Stopped after the first layer is packed into the file, then a signal: exit 128 + N, nothing left behind;
  # SIGKILL leaves the temporary file, which the next writer removes.
  for sig in INT TERM KILL; do
    rm -f "$dir"/*.pack
    cases=$((cases + 1))
    stop_at pack-cache "$d" "${args[@]}"
    [ "$(temps)" = 1 ] || fail "SIG$sig: no temporary file while writing: $(ls -A "$dir")"
    kill -$sig $pid; kill -CONT $pid; wait $pid 2>/dev/null; st=$?
    want=$([ $sig = INT ] && echo 130 || { [ $sig = TERM ] && echo 143 || echo 137; })
    [ "$st" = "$want" ] || fail "SIG$sig while writing: exit $st, want $want: $(cat "$tmp/err")"
    [ "$(packs)" = 0 ] && [ "$(temps)" = $([ $sig = KILL ] && echo 1 || echo 0) ] || fail "SIG$sig while writing left: $(ls -A "$dir")"
  done
  # The dead writer's lock goes with its last reference to the file, which a kernel may drop a
  # little after the process is reaped (a deferred close of its mapping: seen on 16 CPUs). The
  # next writer can only remove a file nobody holds, so wait for that (30 s at most: a loaded
  # CI machine).
  for f in "$dir"/*.pack.tmp*; do
    [ -e "$f" ] || continue             # no match: the glob itself
    for ((i = 0; i < 600; i++)); do flock -n "$f" true && break; sleep 0.05; done
  done
  run 0 "after SIGKILL" "$tmp/t.bin" -- "$d" "${args[@]}" --dump-logits "$tmp/t.bin" && has "saved to" "after SIGKILL"
  [ "$(packs)" = 1 ] && [ "$(temps)" = 0 ] || fail "after SIGKILL: $(ls -A "$dir")"
  # The mapped file cut short while decode runs: one line naming it, exit 1.
  # move: cut after the prompt's step, so every thread's copy of the first layer faults at once.
  for mode in auto move; do
    phase=$([ $mode = auto ] && echo generate || echo evaluated)
    cases=$((cases + 1)); cp "$pack" "$tmp/pack.keep"; stop_at $phase "$d" "${args[@]}" -n 64 --pack-cache $mode
    : >"$pack"; kill -CONT $pid; wait $pid; st=$?
    # One line however many threads fault at once (move: every thread copies from the file).
    [ "$st" = 1 ] && [ "$(grep -c "$pack: the file shrank" "$tmp/err")" = 1 ] ||
      fail "cache truncated while mapped ($mode): exit $st: $(tail -c 300 "$tmp/err")"
    cp "$tmp/pack.keep" "$pack"
  done
  rm -f "$pack"
  # A file-size limit below the file: a note, the run goes on, nothing left behind.
  run 0 "ulimit -f" "$tmp/t.bin" -- bash -c 'ulimit -f 1000; exec "$@"' _ "$d" "${args[@]}" --dump-logits "$tmp/t.bin" &&
    has "it takes [1-9][0-9.]* MB, over the file-size limit" "ulimit -f"   # the size in a unit that shows it
  [ "$(packs)" = 0 ] && [ "$(temps)" = 0 ] || fail "ulimit -f left: $(ls -A "$dir")"
done

# Layers of different types (one layer's weights f32, the rest f16): the move copies each matrix
# at its own tile size. The first load writes the file and moves it, later ones map and move it.
for only in blk.0. blk.1.; do
  rm -rf "$XDG_CACHE_HOME"
  "$bin/gguf-convert" "$tmp/f16.gguf" "$tmp/mixed.gguf" --type f32 --only $only >/dev/null || fail "gguf-convert --only $only"
  args=(-m "$tmp/mixed.gguf" -p "Once upon a time" -n 12 --temp 0); ref=$tmp/ref.bin
  run 0 "$only f32, off" - -- "$d" "${args[@]}" --pack-cache off --dump-logits "$ref"
  run 0 "$only f32, written and moved" "$tmp/t.bin" -- "$d" "${args[@]}" --pack-cache move --dump-logits "$tmp/t.bin" &&
    has "saved to" "$only f32, written and moved"
  for t in 1 2; do           # to the end of the move (stopped there), and the same logits
    cases=$((cases + 1)); stop_at moved "$d" "${args[@]}" -t $t --pack-cache move --dump-logits "$tmp/t.bin"
    kill -CONT $pid; wait $pid; st=$?
    [ "$st" = 0 ] && grep -q "stopped at moved" "$tmp/err" && cmp -s "$tmp/t.bin" "$ref" ||
      fail "$only f32, mapped and moved, -t $t: exit $st: $(tail -c 300 "$tmp/err")"
  done
done

# Never a failed run: no directory to be had, no HOME, two (pretend) nodes, bad modes refused.
model=$tmp/f16.gguf; args=(-m "$model" -p "Once upon a time" -n 12 --temp 0); ref=$tmp/ref.bin
rm -f "$ref"   # the loop above left another model's reference here
"$d" "${args[@]}" --pack-cache off --dump-logits "$ref" >/dev/null 2>&1 || fail "the reference run for what follows"
: >"$tmp/afile"
run 0 "cache directory under a file" "$tmp/t.bin" -- env XDG_CACHE_HOME="$tmp/afile" "$d" "${args[@]}" --dump-logits "$tmp/t.bin" &&
  has "packed-weight cache: cannot create the directory" "cache directory under a file"
run 0 "cache directory under a file, by default" "$tmp/t.bin" -- env -u DECODE_PACK_CACHE XDG_CACHE_HOME="$tmp/afile" "$d" "${args[@]}" --dump-logits "$tmp/t.bin" &&
  { grep -q "packed-weight cache" "$tmp/err" && fail "a cache the user did not ask for left a note: $(grep packed-weight "$tmp/err")"; }
run 0 "no HOME" "$tmp/t.bin" -- env -u HOME -u XDG_CACHE_HOME "$d" "${args[@]}" -v --dump-logits "$tmp/t.bin" &&
  has "no cache directory" "no HOME"
# Injected faults (tests/fault_inject.c): the file cannot be synced, or another writer's clean-up
# removes the temporary file between its creation and its lock. The run goes on in memory with
# the same logits, and nothing is left behind.
rm -rf "$XDG_CACHE_HOME"
run 0 "fdatasync fails" "$tmp/t.bin" -- env LD_PRELOAD="$fault" DECODE_TEST_FAULT=fdatasync "$d" "${args[@]}" \
  --dump-logits "$tmp/t.bin" && has "cannot write .*Input/output error" "fdatasync fails"
[ "$(packs)" = 0 ] && [ "$(temps)" = 0 ] || fail "fdatasync fails left: $(ls -A "$dir")"
run 0 "temporary file removed" "$tmp/t.bin" -- env LD_PRELOAD="$fault" DECODE_TEST_FAULT=tmp-removed "$d" "${args[@]}" \
  --dump-logits "$tmp/t.bin" && has "was removed while being created" "temporary file removed"
[ "$(packs)" = 0 ] && [ "$(temps)" = 0 ] || fail "temporary file removed left: $(ls -A "$dir")"
# A page of the file being written that cannot be stored (SIGBUS in a packing thread): one line
# naming the temporary file, not the model (beside the warning -t 2 gets on one CPU); exit 1,
# nothing left behind.
rm -rf "$XDG_CACHE_HOME"
run 1 "a page cannot be stored" - -- env LD_PRELOAD="$fault" DECODE_TEST_FAULT=pack-sigbus "$d" "${args[@]}" -t 2 &&
  { [ "$(grep -c "^decode: cannot write $dir/[0-9a-f]*\.pack\.tmp[0-9]*: no space left on its file system, or an I/O error$" "$tmp/err")" = 1 ] &&
    [ "$(grep -v "^decode: warning: -t 2 is more than the 1 CPUs available" "$tmp/err" | grep -c .)" = 1 ] ||
    fail "a page cannot be stored: $(head -c 400 "$tmp/err")"; }
[ "$(packs)" = 0 ] && [ "$(temps)" = 0 ] || fail "a page cannot be stored left: $(ls -A "$dir")"
# A good file this process cannot map (out of address space): packed in memory, the file kept.
# (A hard link tells the same file: a rewrite may get the freed inode number back.)
run 0 "cache written" "$tmp/t.bin" -- "$d" "${args[@]}" --dump-logits "$tmp/t.bin"
rm -f "$tmp/kept"; ln "$dir"/*.pack "$tmp/kept"
run 0 "cannot map" "$tmp/t.bin" -- env LD_PRELOAD="$fault" DECODE_TEST_FAULT=map-enomem "$d" "${args[@]}" \
  --dump-logits "$tmp/t.bin" && has "cannot map: Cannot allocate memory; packing in memory, the file kept" "cannot map"
[ "$dir"/*.pack -ef "$tmp/kept" ] && [ "$(temps)" = 0 ] || fail "cannot map: the cache file was not kept: $(ls -iA "$dir")"
# A page of it that cannot be read (EFAULT from faulting it in): rebuilt, not kept.
run 0 "unreadable page" "$tmp/t.bin" -- env LD_PRELOAD="$fault" DECODE_TEST_FAULT=populate-efault "$d" "${args[@]}" \
  --dump-logits "$tmp/t.bin" && has "packed weights saved to" "unreadable page"
[ -e "$dir"/*.pack ] && ! [ "$dir"/*.pack -ef "$tmp/kept" ] || fail "unreadable page: the cache file was not rebuilt: $(ls -iA "$dir")"
rm -f "$tmp/kept"
run 0 "mapped after" "$tmp/t.bin" -- "$d" "${args[@]}" -v --dump-logits "$tmp/t.bin" && has "mapped from" "mapped after"
rm -rf "$XDG_CACHE_HOME"
run 0 "two nodes" "$tmp/t.bin" -- env DECODE_FAKE_NUMA=2 "$d" "${args[@]}" -t 2 --numa distribute -v --dump-logits "$tmp/t.bin" &&
  has "span NUMA nodes" "two nodes"
[ "$(packs)" = 0 ] || fail "two nodes wrote a cache file"
# asked for (rebuild, move) and not done: said without -v; a default that does not apply is quiet
for mode in rebuild move; do
  run 0 "two nodes, $mode" "$tmp/t.bin" -- env DECODE_FAKE_NUMA=2 "$d" "${args[@]}" -t 2 --numa distribute \
    --pack-cache $mode --dump-logits "$tmp/t.bin" && has "not used: the threads span NUMA nodes" "two nodes, $mode"
done
run 0 "two nodes, auto" "$tmp/t.bin" -- env DECODE_FAKE_NUMA=2 "$d" "${args[@]}" -t 2 --numa distribute \
  --pack-cache auto --dump-logits "$tmp/t.bin" && grep -q "span NUMA nodes" "$tmp/err" && fail "two nodes, auto: $(cat "$tmp/err")"
rm -rf "$XDG_CACHE_HOME"
run 0 "on by default" "$tmp/t.bin" -- env -u DECODE_PACK_CACHE "$d" "${args[@]}" --dump-logits "$tmp/t.bin" &&
  has "packed weights saved to" "on by default"
[ "$(packs)" = 1 ] || fail "the default wrote $(packs) cache files, want 1"
# A model rewritten within one timestamp tick keeps every stat field (a second on a file system
# without nanoseconds; forged here: the cache's header takes the rewritten file's stat) and may
# differ only where the fingerprint's 64 samples do not look: a cache made within 2 s of its
# model's change holds a hash of all its bytes, so it is rebuilt, not mapped with the old weights.
# Once its model is older than that, a map that finds the hash right clears it.
# The cache is written within 2 s of the copy where the copy and the run take less than that: a
# run that did and wrote no hash fails; one that took longer (a loaded machine, a sanitizer
# build) tells nothing, so up to three tries, and the cases are skipped, saying so, if none was
# quick enough. Only the packed files go between tries: the tuning cache stays, so no try spends
# its window re-tuning.
racy=$tmp/racy.gguf
args=(-m "$racy" -p "Once upon a time" -n 12 --temp 0)
pack_hash() { od -An -tx8 -j64 -N8 "$pack" | tr -d ' '; }
for ((try = 1; ; try++)); do
  t0=$(date +%s%N)
  rm -rf "$dir"; cp "$tmp/f16.gguf" "$racy"
  run 0 "a new model" - -- "$d" "${args[@]}" && has "saved to" "a new model"
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  pack=$(ls "$dir"/*.pack)
  [ "$(pack_hash)" = 0000000000000000 ] && [ "$ms" -lt 1800 ] && fail "a new model: cache written ${ms} ms after the copy holds no content hash"
  [ "$(pack_hash)" != 0000000000000000 ] || [ "$ms" -lt 1800 ] || [ $try = 3 ] && break
  cases=$((cases - 1))                # the same case, tried again
done
if [ "$(pack_hash)" = 0000000000000000 ]; then
  echo "skipped: the racy cases (three tries each took over 1.8 s from the copy to the cache: ${ms} ms the last)"
  cases=$((cases + 4))
else
size=$(stat -c %s "$racy")
printf '\x55' | dd of="$racy" bs=1 seek=$((size / 2 + 12345)) conv=notrunc status=none   # one weight's byte
set -- $(stat -c '%d %i %s %.9Y %.9Z' "$racy")
perl -e 'open(my $h, "+<", shift) or die; seek($h, 16, 0); print $h pack("Q<5", @ARGV); close $h' \
  "$pack" "$1" "$2" "$3" "${4/./}" "${5/./}"
run 0 "rewritten, off" - -- "$d" "${args[@]}" --pack-cache off --dump-logits "$ref"
run 0 "rewritten within a tick" "$tmp/t.bin" -- "$d" "${args[@]}" -v --dump-logits "$tmp/t.bin" &&
  has "saved to" "rewritten within a tick"
sleep 2.1
run 0 "an older model" "$tmp/t.bin" -- "$d" "${args[@]}" -v --dump-logits "$tmp/t.bin" && has "mapped from" "an older model"
[ "$(pack_hash)" = 0000000000000000 ] || fail "the content hash was not cleared"
run 0 "settled" "$tmp/t.bin" -- "$d" "${args[@]}" -v --dump-logits "$tmp/t.bin" && has "mapped from" "settled" &&
  { grep -q checksum "$tmp/err" && fail "settled: the clearing's write read as a change: $(grep checksum "$tmp/err")"; }
fi

run 2 "bad --pack-cache" - -- "$d" "${args[@]}" --pack-cache maybe && has "bad --pack-cache value 'maybe' (auto, move, off, rebuild)" "bad --pack-cache"
run 2 "bad DECODE_PACK_CACHE" - -- env DECODE_PACK_CACHE=yes "$d" "${args[@]}" && has "DECODE_PACK_CACHE must be" "bad env"
run 0 "bad DECODE_PACK_CACHE, --help" - -- env DECODE_PACK_CACHE=yes "$d" --help
run 0 "bad DECODE_PACK_CACHE, --pack-cache given" "$tmp/t.bin" -- env DECODE_PACK_CACHE=yes "$d" "${args[@]}" --pack-cache off --dump-logits "$tmp/t.bin"
run 2 "bad decode-bench --pack-cache" - -- "$bin/decode-bench" -m "$model" --pack-cache maybe
run 0 "decode-bench maps it" - -- "$bin/decode-bench" -m "$model" -p 0 -n 4 -r 1 --roofline-mib 0 &&
  run 0 "decode-bench maps it, second run" - -- env -u DECODE_PACK_CACHE "$bin/decode-bench" -m "$model" -p 0 -n 4 -r 1 \
    --roofline-mib 0 -o jsonl &&
  has "packed weights mapped from" "decode-bench second run" &&
  { grep -q "moved into memory" "$tmp/err" && fail "decode-bench moved the weights by default"; }
run 0 "decode-bench, move" - -- "$bin/decode-bench" -m "$model" -p 0 -n 4 -r 1 --roofline-mib 0 --pack-cache move &&
  has "packed weights moved into memory in" "decode-bench, move"
# decode-bench too: the mapped file cut short is one line naming it, exit 1 (it died of SIGBUS)
cases=$((cases + 1))
: >"$tmp/err"   # emptied here: the child's own truncation may come after the first look below
"$bin/decode-bench" -m "$model" -p 0 -n 256 -r 100 --roofline-mib 0 >/dev/null 2>"$tmp/err" & pid=$!
for ((i = 0; i < 1200; i++)); do
  grep -q "mapped from" "$tmp/err" && break; kill -0 $pid 2>/dev/null || break; sleep 0.05
done
pack=$(sed -n 's/^decode-bench: packed weights mapped from \(.*\.pack\).*/\1/p' "$tmp/err")
if [ -z "$pack" ]; then   # the cases below need the file's name; say whether it ran on or ended, and how
  if kill -0 $pid 2>/dev/null; then how="still running after $((i / 20)) s"; kill $pid; wait $pid
  else wait $pid; how="ended with status $? after $((i / 20)) s"; fi
  fail "decode-bench named no mapped file ($how): $(tail -c 300 "$tmp/err")"
  echo "$fails failed"; exit 1
fi
: >"$pack"; wait $pid; st=$?
[ "$st" = 1 ] && [ "$(grep -c "$pack: the file shrank" "$tmp/err")" = 1 ] ||
  fail "decode-bench, cache truncated while mapped: exit $st: $(tail -c 300 "$tmp/err")"
# A directory where the cache file goes: a note, no file written (it wrote a whole temporary copy
# on every load, then failed to rename it)
rm -f "$pack"; mkdir "$pack"
run 0 "a directory in the way" - -- "$d" -m "$model" -p "Once upon a time" -n 1 --temp 0 -v && has "cannot replace $pack" "a directory in the way"
[ "$(temps)" = 0 ] && ! grep -q "saved to" "$tmp/err" || fail "a directory in the way: $(ls -A "$dir")"
rmdir "$pack"
# No output goes into the cache directory, whose files loads replace and remove (a dump there
# went to a file no name reached, exit 0; a plot over a cache file destroyed it): the cache file,
# another name there, a link to either, in every --pack-cache mode; the user's files elsewhere
# untouched
dargs=(-m "$model" -p "Once upon a time" -n 4 --temp 0)
run 0 "the cache for the output cases" - -- "$d" "${dargs[@]}"
sum=$(md5sum <"$pack"); files=$(ls -A "$dir")
ln "$pack" "$tmp/hard"; ln -s "$pack" "$tmp/soft"
ln -s "$dir/new.bin" "$tmp/dangling"; ln -s cache/decode/packed/rel.bin "$tmp/relative"
for mode in auto off; do
  for out in "$pack" "$tmp/hard" "$tmp/soft"; do
    run 1 "dump onto $out, --pack-cache $mode" - -- "$d" "${dargs[@]}" --pack-cache $mode --dump-logits "$out" &&
      has "is a file of decode's cache directory (GEMV tuning, packed weights); not overwriting it" "dump onto $out"
  done
  for out in "$dir/x.pack.tmp1" "$tmp/dangling" "$tmp/relative" "$dir/../tune.dump"; do
    run 1 "dump to a new name $out, --pack-cache $mode" - -- "$d" "${dargs[@]}" --pack-cache $mode --dump-logits "$out" &&
      has "would be made in decode's cache directory, whose files tunes and loads replace" "dump to $out"
  done
done
# the tuning's file beside packed/ too (a tune renames a new one over it)
DECODE_TUNE=force "$d" "${dargs[@]}" >/dev/null 2>&1
if [ -f "$dir/../tune" ]; then
  tsum=$(md5sum <"$dir/../tune")
  run 1 "dump onto the tuning's file" - -- "$d" "${dargs[@]}" --dump-logits "$dir/../tune" &&
    has "is a file of decode's cache directory (GEMV tuning, packed weights); not overwriting it" "dump onto tune"
  [ "$(md5sum <"$dir/../tune")" = "$tsum" ] || fail "a refused dump changed the tuning's file"
else
  echo "skipped: the dump onto the tuning's file (none written: the scalar path tunes nothing)"; cases=$((cases + 1))
fi
run 1 "decode-bench --plot onto the cache file" - -- "$bin/decode-bench" -m "$model" -p 0 -n 4 -r 1 --roofline-mib 0 \
  --plot "$tmp/soft" && has "is a file of decode's cache directory (GEMV tuning, packed weights); not overwriting it" "--plot onto the cache"
[ "$(md5sum <"$pack")" = "$sum" ] || fail "a refused output changed the cache file"
[ "$(ls -A "$dir")" = "$files" ] || fail "a refused output left a file in the cache directory: $(ls -A "$dir" | tr "\n" " ")"
rm -f "$tmp/hard" "$tmp/soft" "$tmp/dangling" "$tmp/relative"

echo "pack cache cases: $cases"
[ "$cases" = 131 ] || fail "$cases cases ran, want 131"
[ $fails = 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
