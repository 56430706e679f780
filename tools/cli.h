// What every tool does before it trusts its process: descriptors 0-2 made valid (so no file it
// opens can become stdout or stderr), SIGINT/SIGTERM/SIGHUP turned into exit 128 + N after a
// registered temporary file is removed, a SIGBUS from a file mapping whose file shrank turned
// into one line naming the file and exit 1, and a whole-file reader with a size bound.
#pragma once
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

// The first stop signal's number (SIGINT, SIGTERM, SIGHUP) once one came; 0 before.
extern volatile sig_atomic_t cli_stop;

// Call first in main; tool names the error lines. A closed descriptor 0, 1 or 2 is reopened on
// /dev/null the way no I/O can succeed on it (stdin write-only, stdout/stderr read-only), so a
// closed stdout still fails writes. SIGPIPE is ignored (a closed pipe is a write error), and
// SIGXFSZ (a write past ulimit -f fails with EFBIG).
// graceful = 0: a stop signal exits at once. graceful = 1: the first only sets cli_stop (the
// tool stops at its next check, and blocking calls return EINTR); a second one exits at once.
void cli_init(const char *tool, int graceful);
// decode's stderr from here on: each brace written \x7b or \x7d (the SIGBUS lines too), so that a
// line cli_raw_line writes (--l4-stats's JSON) is the only '{' there (docs/design.md, Interfaces).
void cli_braces(void);
// line and a newline onto stderr as they are, after what stderr holds. 0 ok, -1 a failed write.
int cli_raw_line(const char *line);
// The file whose mapping a SIGBUS is reported against (the handler copies the path). The
// handler names the file the faulting address maps instead where that is another one (found in
// /proc/self/maps): the temporary cache file being written (cli_temp_file) or any other file.
void cli_mapped_file(const char *path);
// A temporary file the handlers remove before exiting; NULL when there is none any more.
// Matches gguf_writer's temp hook.
void cli_temp_file(const char *path);
// An output file this run created (none was there before): the handlers remove it too, so a
// stopped run leaves no empty or half-written file behind; NULL once it is complete.
void cli_created_output(const char *path);
// Whether an open of path for writing would create a file, nothing being there: path, or the end
// of the chain of symbolic links it starts (a dangling link stays the user's; its target would be
// this run's). made (n bytes) receives that file's path, the one to remove to leave things as they were.
int cli_output_new(const char *path, char *made, size_t n);
// Test hook: when the environment has DECODE_TEST_STOP=phase, writes "TOOL: stopped at PHASE"
// to stderr and stops the process (SIGSTOP) until a SIGCONT, so a test can act at that point.
void cli_test_stop(const char *phase);

// Reads the whole of path (a regular file, pipe or character device; a directory is refused
// with EISDIR) into a malloc'ed buffer, NUL-terminated after *len bytes. More than max bytes
// stops the read: NULL with errno EFBIG. NULL with errno on failure (EINTR when cli_stop was
// set meanwhile). st (may be NULL) receives what fstat says of the opened file. /dev/stdin (or
// /dev/fd/0, /proc/self/fd/0: by those names only) when the process started with stdin closed:
// EBADF, not the /dev/null kept in its place.
char *cli_read_file(const char *path, size_t max, size_t *len, struct stat *st);

// The CPUs this process may run on (at least 1), and the physical cores among them (SMT siblings
// share a core's memory bandwidth; every CPU counts where sysfs does not say, 1 where the
// topology cannot be read at all): the default thread count.
int cli_cpus(void);
int cli_physical_cores(void);
// The warning, on stderr, when n threads are more than the CPUs they will run on (numa: the
// topo_numa_mode asked for, -1 the default; isolate counts the starting node's).
void cli_warn_threads(int n, int numa);
// How many of n_threads a decoder runs, and from which position its plan over all of them
// serves or why none does: lines on stderr headed "WHO: " (decode's, decode-bench's with a path).
struct decoder_s;
void cli_print_threads(const char *who, const struct decoder_s *d, int n_threads);

// The most text a tool reads as a prompt or an input to tokenize, whatever the context: the
// tokenizer needs ~60 bytes of memory per byte of text, so 16 MiB keeps it near 1 GB, and an
// endless input (/dev/zero) is refused rather than read until memory runs out.
#define CLI_MAX_TEXT ((size_t)16 << 20)

// A file an output must not overwrite: an input of the run (its st_dev, st_ino), named in the error.
typedef struct { uint64_t dev, ino; const char *what; } cli_input;
// Opens path for writing (created 0666 when missing) without truncating it, and refuses a regular
// file that is one of in[0..n) (a hard or symbolic link to it included), a file of decode's cache
// directory or its packed/ or a new name there (a dangling link's target included: tunes and loads
// replace and remove their files), the file, pipe or socket stdout or stderr already write to, and
// a terminal (these outputs are files: raw floats, an SVG); truncates it when trunc. NULL after a
// one-line error naming flag.
FILE *cli_open_output(const char *flag, const char *path, const cli_input *in, int n, int trunc);

// The environment variables of vars (CLI_ENV_*: those the tool reads) as every tool takes them
// (an empty one is unset): NULL when each is valid or unset, else what is wrong (a static string;
// the tool prints it and exits 2). A tool never refuses a variable it does not read.
enum {
    CLI_ENV_ISA = 1,        // DECODE_ISA
    CLI_ENV_TUNE = 2,       // DECODE_TUNE
    CLI_ENV_DECODER = 4,    // DECODE_WAIT_PREFETCH, DECODE_PLAN, DECODE_FAKE_NUMA
    CLI_ENV_ALL = 7
};
const char *cli_env_problem(unsigned vars);

// A KV cache type by name, as llama.cpp's -ctk/-ctv take it: "f32" or "f16" -> WTYPE_F32 or
// WTYPE_F16; -1 for anything else.
int cli_parse_cache_type(const char *s);
// --tail-split: "auto" -1, "off" 0, "on" 1 (decoder_opts.tail_split); -2 for anything else.
int cli_parse_tail_split(const char *s);
const char *cli_tail_split_name(int mode);
