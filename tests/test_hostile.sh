#!/usr/bin/env bash
# What a careless or hostile command line must not do to the tools: lose the user's files (a
# dump naming the model, the prompt or stdout; a failed run), write into the wrong file (closed
# descriptors 0-2), hang (FIFOs, directories, devices as inputs), crash (a model truncated
# during or after the load), ignore a signal in any phase (exit 128 + N), leave temporary files,
# or read an endless prompt. Phases are reached through DECODE_TEST_STOP, which stops the tool
# (SIGSTOP) at a named point: the test waits for that state, acts, then sends SIGCONT. No sleeps
# are relied on; every wait polls an observable state with a generous deadline.
# usage: test_hostile.sh BIN_DIR SHARED_DIR [SANITIZE]
set -u
bin=$1; shared=$2; sanitize=${3:-}
src=$shared/testdata/models/stories260K.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cases=0; fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
d=$bin/decode
model=$tmp/m.gguf
cp "$src" "$model" && chmod u+w "$model"   # the shared copy is read-only, and so its copy (cp keeps the mode)
row=2048                                  # stories260K: 512 logits of 4 bytes

# run STATUS WHAT -- command...: exit status, and for a failure exactly one stderr line and an
# empty stdout. A run that outlives 120 s is a hang.
run() {
  local want=$1 what=$2; shift 3
  cases=$((cases + 1))
  timeout -k 5 120 "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  [ "$got" = "$want" ] || { fail "$what: exit $got, want $want: $(head -c 300 "$tmp/err")"; return 1; }
  if [ "$want" = 1 ] || [ "$want" = 2 ]; then
    [ "$(wc -l <"$tmp/err")" = 1 ] || { fail "$what: stderr is not one line: $(head -c 300 "$tmp/err")"; return 1; }
    [ -s "$tmp/out" ] && { fail "$what: wrote to stdout"; return 1; }
  fi
  return 0
}
has() { grep -q -- "$1" "$tmp/err" || fail "$2: stderr lacks '$1': $(head -c 300 "$tmp/err")"; }
same() { cmp -s "$1" "$2" || fail "$3: $1 changed"; }

# Waits until pid is stopped (state T): the tool reached its DECODE_TEST_STOP phase.
wait_stopped() {
  local pid=$1 i st
  for ((i = 0; i < 2400; i++)); do
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$st" = T ] && return 0
    sleep 0.05
  done
  return 1
}
# 0 while pid runs (neither gone nor a zombie waiting for its parent, which kill -0 still finds).
running() { local st; st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ -n "$st" ] && [ "$st" != Z ]; }
# phase PHASE WHAT ACTION -- command...: runs the command in the background stopped at PHASE,
# runs ACTION (a shell snippet; $pid is the tool) and resumes it; its status lands in $st.
phase() {
  local ph=$1 what=$2 action=$3; shift 4
  cases=$((cases + 1))
  DECODE_TEST_STOP=$ph "$@" >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  if ! wait_stopped $pid; then kill -9 $pid 2>/dev/null; wait $pid; st=-1; fail "$what: never stopped at $ph"; return 1; fi
  eval "$action"
  kill -CONT $pid
  wait $pid; st=$?
  return 0
}

# ---- 1. the dump never overwrites the model, the prompt or stdout, nor anything when a run fails
cp "$model" "$tmp/m.orig"
run 1 "dump = model" -- "$d" -m "$model" -p hi --dump-logits "$model" && has "is the model file" "dump = model"
same "$model" "$tmp/m.orig" "dump = model"
ln "$model" "$tmp/hard.gguf"
run 1 "dump = hard link to the model" -- "$d" -m "$model" -p hi --dump-logits "$tmp/hard.gguf"
same "$model" "$tmp/m.orig" "dump = hard link"
ln -s "$model" "$tmp/sym.gguf"
run 1 "dump = symlink to the model" -- "$d" -m "$model" -p hi --dump-logits "$tmp/sym.gguf"
same "$model" "$tmp/m.orig" "dump = symlink"
run 1 "model via symlink, dump = model" -- "$d" -m "$tmp/sym.gguf" -p hi --dump-logits "$model"
same "$model" "$tmp/m.orig" "model via symlink"
printf 'precious' >"$tmp/old.bin"; cp "$tmp/old.bin" "$tmp/old.orig"
run 1 "missing model keeps the dump" -- "$d" -m "$tmp/none.gguf" -p hi --dump-logits "$tmp/old.bin"
same "$tmp/old.bin" "$tmp/old.orig" "missing model"
run 1 "bad model keeps the dump" -- "$d" -m /etc/hostname -p hi --dump-logits "$tmp/old.bin"
same "$tmp/old.bin" "$tmp/old.orig" "bad model"
run 1 "prompt over the context keeps the dump" -- "$d" -m "$model" -p "Once upon a time there was a girl" -c 4 --dump-logits "$tmp/old.bin"
same "$tmp/old.bin" "$tmp/old.orig" "prompt over the context"
# a stop before the first row: an existing dump as it was, a new one gone (it would read as a result)
phase pack "a stop while packing keeps the dump" 'kill -INT $pid' -- "$d" -m "$model" -p hi -n 2 --temp 0 \
  --pack-cache off --dump-logits "$tmp/old.bin"
[ "$st" = 130 ] || fail "a stop while packing: exit $st: $(cat "$tmp/err")"
same "$tmp/old.bin" "$tmp/old.orig" "a stop while packing"
rm -f "$tmp/new.bin"
phase pack "a stop while packing, a new dump" 'kill -INT $pid' -- "$d" -m "$model" -p hi -n 2 --temp 0 \
  --pack-cache off --dump-logits "$tmp/new.bin"
[ "$st" = 130 ] && [ ! -e "$tmp/new.bin" ] || fail "a stop while packing, a new dump: exit $st, $(ls -l "$tmp/new.bin" 2>&1)"
# through a dangling link: the link stays, its target (made by this run) goes
rm -f "$tmp/target.bin"; ln -sfn target.bin "$tmp/dangling.bin"
phase pack "a stop while packing, a dump through a dangling link" 'kill -INT $pid' -- "$d" -m "$model" -p hi -n 2 \
  --temp 0 --pack-cache off --dump-logits "$tmp/dangling.bin"
[ "$st" = 130 ] && [ -L "$tmp/dangling.bin" ] && [ ! -e "$tmp/target.bin" ] ||
  fail "a dump through a dangling link: exit $st, $(ls -l "$tmp/dangling.bin" "$tmp/target.bin" 2>&1)"
printf 'Once upon a time' >"$tmp/p.txt"; cp "$tmp/p.txt" "$tmp/p.orig"
run 1 "dump = prompt file" -- "$d" -m "$model" -f "$tmp/p.txt" --dump-logits "$tmp/p.txt" && has "is the prompt file" "dump = prompt"
same "$tmp/p.txt" "$tmp/p.orig" "dump = prompt file"
cases=$((cases + 1))
"$d" -m "$model" -p hi -n 2 --temp 0 --dump-logits "$tmp/so.txt" >"$tmp/so.txt" 2>"$tmp/err"; st=$?
[ "$st" = 1 ] && grep -q "where stdout goes" "$tmp/err" || fail "dump = stdout's file: exit $st: $(cat "$tmp/err")"
run 1 "dump in a missing directory" -- "$d" -m "$model" -p hi --dump-logits "$tmp/no/such/dir/x"
run 1 "dump is a directory" -- "$d" -m "$model" -p hi --dump-logits "$tmp"
run 0 "dump = /dev/null" -- "$d" -m "$model" -p hi -n 2 --temp 0 --dump-logits /dev/null
# a pipe stdout also writes to would interleave raw floats with the text: refused like its file
cases=$((cases + 1))
"$d" -m "$model" -p hi -n 2 --temp 0 --dump-logits /dev/stdout 2>"$tmp/err" | cat >"$tmp/pipe.out"
st=${PIPESTATUS[0]}
[ "$st" = 1 ] && grep -q "where stdout goes" "$tmp/err" && [ ! -s "$tmp/pipe.out" ] ||
  fail "dump = stdout's pipe: exit $st, $(wc -c <"$tmp/pipe.out") bytes out: $(cat "$tmp/err")"
# ... and a terminal, by any name (/dev/tty is another device number than stdout's /dev/pts/N)
cases=$((cases + 1))
script -qec "\"$d\" -m \"$model\" -p hi -n 2 --temp 0 --dump-logits /dev/tty" /dev/null >"$tmp/tty.out" 2>&1; st=$?
[ "$st" = 1 ] && grep -q "is a terminal" "$tmp/tty.out" || fail "dump = /dev/tty: exit $st: $(head -c 300 "$tmp/tty.out")"

# ---- 2. closed descriptors: nothing but logits in the dump, in every combination
cp "$tmp/m.orig" "$model"                 # each section starts whole, even when one above failed
run 0 "reference" -- "$d" -m "$model" -p "Once upon" -n 8 --temp 0 --dump-logits "$tmp/ref.bin"
cp "$tmp/out" "$tmp/ref.out"
for combo in 0 1 2 01 02 12 012; do
  cases=$((cases + 1))
  rm -f "$tmp/c.bin" "$tmp/c.out" "$tmp/c.err"
  cmd=("$d" -m "$model" -p "Once upon" -n 8 --temp 0 --dump-logits "$tmp/c.bin")
  case $combo in
    0) "${cmd[@]}" <&- >"$tmp/c.out" 2>"$tmp/c.err" ;;
    1) "${cmd[@]}" >&- 2>"$tmp/c.err" ;;
    2) "${cmd[@]}" 2>&- >"$tmp/c.out" ;;
    01) "${cmd[@]}" <&- >&- 2>"$tmp/c.err" ;;
    02) "${cmd[@]}" <&- 2>&- >"$tmp/c.out" ;;
    12) "${cmd[@]}" >&- 2>&- ;;
    012) "${cmd[@]}" <&- >&- 2>&- ;;
  esac
  st=$?
  if [[ $combo == *1* ]]; then     # no stdout: a failed write; the dump whole rows, or gone if none
    [ "$st" = 1 ] || fail "closed $combo: exit $st"
    if [ -e "$tmp/c.bin" ]; then
      size=$(stat -c %s "$tmp/c.bin")
      [ "$size" -gt 0 ] && [ $((size % row)) = 0 ] && cmp -s -n "$size" "$tmp/c.bin" "$tmp/ref.bin" ||
        fail "closed $combo: the dump ($size bytes) is not whole rows of the logits"
    fi
    [ -f "$tmp/c.err" ] && { [ "$(wc -l <"$tmp/c.err")" = 1 ] && grep -q "stdout" "$tmp/c.err" || fail "closed $combo: stderr: $(cat "$tmp/c.err")"; }
  else
    [ "$st" = 0 ] || fail "closed $combo: exit $st"
    cmp -s "$tmp/c.bin" "$tmp/ref.bin" || fail "closed $combo: the dump differs from the logits"
    cmp -s "$tmp/c.out" "$tmp/ref.out" || fail "closed $combo: stdout differs"
  fi
done
cases=$((cases + 1))    # gguf-convert with stdout and stderr closed: OUT holds only the model
"$bin/gguf-convert" "$model" "$tmp/cv.gguf" --type f32 >&- 2>&-; st=$?
"$bin/gguf-info" "$tmp/cv.gguf" >/dev/null 2>&1 && [ "$st" = 0 ] || fail "gguf-convert with 1 and 2 closed: exit $st"

# ---- 3. inputs that are not regular files: refused or read, never a hang
mkfifo "$tmp/fifo"
# model_args TOOL PATH: the tool's command line with PATH as its model.
model_args() {
  case $1 in
    decode|tokenize) args=(-m "$2" -p hi) ;;
    gguf-info) args=("$2") ;;
    gguf-convert) args=("$2" "$tmp/x.gguf" --type f16) ;;
  esac
}
for tool in decode gguf-info gguf-convert tokenize; do
  model_args $tool "$tmp/fifo"
  run 1 "$tool: FIFO as the model" -- "$bin/$tool" "${args[@]}" && has "not a regular file" "$tool FIFO"
  model_args $tool "$tmp"
  run 1 "$tool: directory as the model" -- "$bin/$tool" "${args[@]}"
  model_args $tool /dev/zero
  run 1 "$tool: /dev/zero as the model" -- "$bin/$tool" "${args[@]}"
done
run 1 "prompt file is a directory" -- "$d" -m "$model" -f "$tmp" && has "Is a directory" "prompt directory"
run 1 "prompt file is /dev/zero" -- "$d" -m "$model" -f /dev/zero && has "more than" "prompt /dev/zero"
run 0 "prompt file is /dev/null" -- "$d" -m "$model" -f /dev/null -n 2 --temp 0
run 0 "prompt from a pipe" -- "$d" -m "$model" -f <(printf 'Once upon') -n 2 --temp 0
[ "$(head -c 9 "$tmp/out")" = "Once upon" ] || fail "prompt from a pipe not echoed"
run 1 "tokenize -f /dev/zero" -- "$bin/tokenize" -m "$model" -f /dev/zero && has "more than" "tokenize /dev/zero"
run 1 "tokenize -f directory" -- "$bin/tokenize" -m "$model" -f "$tmp"
# A prompt FIFO waits for its writer; Ctrl-C ends the wait (a writer that never writes).
cases=$((cases + 1))
"$d" -m "$model" -f "$tmp/fifo" >"$tmp/out" 2>"$tmp/err" &
pid=$!
# The writer, opened read-write so that this never waits for decode (a decode that never opens the
# FIFO fails the case instead of hanging the test); then up to 60 s for decode to have it open.
# /proc shows the path resolved: TMPDIR may go through a link.
exec 7<>"$tmp/fifo"
fifo=$(readlink -f "$tmp/fifo")
has_fifo() { ls -l /proc/$pid/fd 2>/dev/null | grep -qF -- "-> $fifo"; }
for ((i = 0; i < 600; i++)); do
  has_fifo && break
  running $pid || break
  sleep 0.1
done
if has_fifo; then
  kill -INT $pid
  for ((i = 0; i < 600; i++)); do running $pid || break; sleep 0.1; done   # 60 s to end
  running $pid && { kill -9 $pid; fail "decode ignored SIGINT while waiting on a prompt FIFO"; }
  wait $pid; st=$?
  [ "$st" = 130 ] || fail "SIGINT while waiting on a prompt FIFO: exit $st: $(cat "$tmp/err")"
else
  kill -9 $pid 2>/dev/null; wait $pid
  fail "decode never opened the prompt FIFO: $(cat "$tmp/err")"
fi
exec 7>&-

# ---- 4. a prompt longer than the context is refused before it is read whole
head -c $((20 << 20)) /dev/zero | tr '\0' 'a' >"$tmp/big.txt"
cases=$((cases + 1))
if [ -z "$sanitize" ]; then lim="ulimit -v 400000;"; else lim=""; fi   # sanitizers reserve terabytes
bash -c "$lim exec \"\$@\"" _ "$d" -m "$model" -f "$tmp/big.txt" >"$tmp/out" 2>"$tmp/err"; st=$?
[ "$st" = 1 ] && grep -q "more than .* bytes" "$tmp/err" || fail "20 MiB prompt: exit $st: $(cat "$tmp/err")"
run 1 "20 MiB -p prompt" -- "$d" -m "$model" -p "$(head -c 100000 "$tmp/big.txt")" && has "more than the" "long -p"

# ---- 5. signals in every phase: exit 128 + N; the first stops cleanly, a second at once
for ph in prompt pack generate; do
  for sig in INT TERM; do
    want=$([ $sig = INT ] && echo 130 || echo 143)
    phase $ph "SIG$sig at $ph" 'kill -'$sig' $pid' -- "$d" -m "$model" -p "Once upon" -n 64 --temp 0 --dump-logits "$tmp/s.bin"
    [ "$st" = "$want" ] || fail "SIG$sig at $ph: exit $st, want $want: $(cat "$tmp/err")"
    grep -q "interrupted" "$tmp/err" || fail "SIG$sig at $ph: no 'interrupted' line"
    [ $(( $(stat -c %s "$tmp/s.bin" 2>/dev/null || echo 0) % row )) = 0 ] || fail "SIG$sig at $ph: dump cut mid-row"
  done
done
phase generate "SIGINT then SIGTERM" 'kill -INT $pid; kill -TERM $pid' -- "$d" -m "$model" -p "Once upon" -n 64 --temp 0
# Both are pending at SIGCONT: whichever handler runs second exits, with its own number.
[ "$st" = 143 ] || [ "$st" = 130 ] && ! grep -q "decode: load" "$tmp/err" || fail "a second signal should exit at once: exit $st: $(cat "$tmp/err")"
phase write "gguf-convert SIGTERM" 'kill -TERM $pid' -- "$bin/gguf-convert" "$model" "$tmp/cv.gguf" --type f16
[ "$st" = 143 ] || fail "gguf-convert SIGTERM: exit $st"
phase write "gguf-convert SIGINT" 'kill -INT $pid' -- "$bin/gguf-convert" "$model" "$tmp/new.gguf" --type bf16
[ "$st" = 130 ] || fail "gguf-convert SIGINT: exit $st"
[ -e "$tmp/new.gguf" ] && fail "gguf-convert SIGINT: OUT created"
[ "$(ls -A "$tmp" | grep -c tmp)" = 0 ] || fail "temporary files left: $(ls -A "$tmp")"
"$bin/gguf-info" "$tmp/cv.gguf" >/dev/null || fail "gguf-convert SIGTERM damaged the existing OUT"
# SIGKILL leaves the temporary file (no handler runs); the next write into the directory removes
# it, as no writer holds its lock
phase write "gguf-convert SIGKILL" 'kill -KILL $pid' -- "$bin/gguf-convert" "$model" "$tmp/k.gguf" --type bf16
[ "$st" = 137 ] && [ "$(ls -A "$tmp" | grep -c gguf-tmp)" = 1 ] || fail "gguf-convert SIGKILL: exit $st: $(ls -A "$tmp")"
"$bin/gguf-convert" "$model" "$tmp/k2.gguf" --type f16 >/dev/null 2>&1 || fail "gguf-convert after a SIGKILL"
[ "$(ls -A "$tmp" | grep -c gguf-tmp)" = 0 ] && [ ! -e "$tmp/k.gguf" ] || fail "the SIGKILL's temporary file stayed: $(ls -A "$tmp")"
rm -f "$tmp/k2.gguf"

# ---- 6. the model truncated during the load is an error naming it; after the load, harmless
cp "$tmp/m.orig" "$model"
phase pack "truncated during the load" 'truncate -s 300000 "$model"' -- "$d" -m "$model" -p "Once upon" -n 8 --temp 0
[ "$st" = 1 ] && [ "$(wc -l <"$tmp/err")" = 2 ] && grep -q "$model: the file shrank" "$tmp/err" ||
  fail "truncated during the load: exit $st: $(cat "$tmp/err")"
cp "$tmp/m.orig" "$tmp/{t}.gguf"         # its braces shown as stderr shows every other one
phase pack "truncated during the load, braces" 'truncate -s 300000 "$tmp/{t}.gguf"' -- "$d" -m "$tmp/{t}.gguf" -p "Once" -n 8
[ "$st" = 1 ] && grep -qF '\x7bt\x7d.gguf: the file shrank' "$tmp/err" && ! grep -q '[{}]' "$tmp/err" ||
  fail "truncated during the load, braces: exit $st: $(cat "$tmp/err")"
cp "$tmp/m.orig" "$model"
phase generate "truncated after the load" ': >"$model"' -- "$d" -m "$model" -p "Once upon" -n 8 --temp 0 --dump-logits "$tmp/t.bin"
[ "$st" = 0 ] && cmp -s "$tmp/t.bin" "$tmp/ref.bin" && cmp -s "$tmp/out" "$tmp/ref.out" ||
  fail "truncated after the load: exit $st: $(tail -c 300 "$tmp/err")"
cp "$tmp/m.orig" "$model"
phase write "gguf-convert: IN truncated" 'truncate -s 100000 "$model"' -- "$bin/gguf-convert" "$model" "$tmp/tr.gguf" --type f32
[ "$st" = 1 ] && grep -q "the file shrank" "$tmp/err" || fail "gguf-convert, IN truncated: exit $st: $(cat "$tmp/err")"
[ -e "$tmp/tr.gguf" ] && fail "gguf-convert, IN truncated: OUT created"
[ "$(ls -A "$tmp" | grep -c tmp)" = 0 ] || fail "temporary files left after a fault: $(ls -A "$tmp")"
cp "$tmp/m.orig" "$model"

# ---- 7. small things: OUT names at NAME_MAX, seeds, -t above the CPUs, the empty-prompt error
name255=$(printf 'n%.0s' {1..250}).gguf
run 0 "OUT name of 255 bytes" -- "$bin/gguf-convert" "$model" "$tmp/$name255" --type f16
[ -f "$tmp/$name255" ] || fail "OUT of 255 bytes not written"
run 1 "OUT name of 256 bytes" -- "$bin/gguf-convert" "$model" "$tmp/x$name255" --type f16
cases=$((cases + 1))
for i in $(seq 30); do "$d" -m "$model" -p "Once" -n 1 2>&1 >/dev/null | grep "decode: seed"; done >"$tmp/seeds"
[ "$(sort -u "$tmp/seeds" | wc -l)" = 30 ] || fail "30 back-to-back runs gave $(sort -u "$tmp/seeds" | wc -l) distinct seeds"
cpus=$(nproc)
run 0 "-t above the CPUs" -- "$d" -m "$model" -p "Once" -n 2 --temp 0 -t $((cpus + 1)) && has "warning: -t $((cpus + 1))" "-t warning"
run 0 "-t 1" -- "$d" -m "$model" -p "Once" -n 2 --temp 0 -t 1
grep -q warning "$tmp/err" && fail "-t 1 warned"
# -t 4096 under an address limit: the schedule starts only threads that have work, and this
# 1.2 MB model's step runs on one thread, so the run succeeds instead of failing to start 4095
# idle threads (sanitizers cannot run under an address limit).
if [ -z "$sanitize" ]; then
  cases=$((cases + 1))
  bash -c 'ulimit -v 1500000; exec "$@"' _ "$d" -m "$model" -p hi -n 2 -t 4096 >"$tmp/out" 2>"$tmp/err"; st=$?
  [ "$st" = 0 ] && ! grep -q "cannot start" "$tmp/err" || fail "-t 4096: exit $st: $(tail -c 300 "$tmp/err")"
fi
# A context of 2^24 tokens whose bound (tokens x the longest piece) passes 16 MiB: decode still
# reads no more than 16 MiB of a prompt (the old bound let /dev/zero run to ~100 MiB, and a file
# with one long piece to gigabytes).
"$bin/gguf-synth" "$tmp/bigctx.gguf" --n-embd 2 --n-head 1 --head-dim 2 --n-kv-head 1 --n-ff 2 --n-layer 1 \
  --ctx 16777216 --n-vocab 260 >/dev/null || fail "gguf-synth bigctx"
run 1 "prompt read past 16 MiB" -- "$d" -m "$tmp/bigctx.gguf" -f /dev/zero -c 0 -t 1 &&
  has "/dev/zero: more than 16777216 bytes, the most decode reads of a prompt" "16 MiB"
# A file asking for 131072 query heads of one KV head: each thread's attention scratch holds a
# score row a head: 8 TiB a thread at a context of 2^24. Refused before allocating, naming the context.
"$bin/gguf-synth" "$tmp/heads.gguf" --n-embd 2 --n-head 131072 --head-dim 2 --n-kv-head 1 --n-ff 2 --n-layer 1 \
  --ctx 16777216 --dtype f16 --n-vocab 260 >/dev/null || fail "gguf-synth heads"
run 1 "attention scratch past memory" -- "$d" -m "$tmp/heads.gguf" -p hi -n 2 --temp 0 -c 0 -t 1 &&
  has "context size 16777216 needs a 0.2 GiB KV cache and 8192.0 GiB of attention scratch (1 thread(s))" "heads"
# A model that asks for no BOS: the empty prompt's error must not blame --no-bos.
"$bin/gguf-synth" "$tmp/nobos.gguf" >/dev/null || fail "gguf-synth"
key=tokenizer.ggml.add_bos_token
off=$(LC_ALL=C grep -obUa "$key" "$tmp/nobos.gguf" | head -1 | cut -d: -f1)
[ -n "$off" ] || fail "gguf-synth wrote no $key"
printf '\0' | dd of="$tmp/nobos.gguf" bs=1 seek=$((off + ${#key} + 4)) conv=notrunc status=none
run 1 "empty prompt, model without BOS" -- "$d" -m "$tmp/nobos.gguf" -p "" && has "adds no BOS" "empty prompt"
grep -q -- "--no-bos" "$tmp/err" && fail "the empty-prompt error names --no-bos, which was not given"

want=$([ -z "$sanitize" ] && echo 70 || echo 69)
[ "$cases" = $want ] || fail "ran $cases cases, expected $want"
echo "hostile cli: $cases cases, $fails failures"
[ "$fails" = 0 ]
