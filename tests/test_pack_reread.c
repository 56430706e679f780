// The packed-weight cache read back into 2 MiB pages (runtime/packcache.c map_huge). The first load
// writes the file; then half of its cached pages are made 4 KiB folios (dropped, then read 4 KiB at
// a time with readahead off) and the other half 2 MiB ones (mapped with MADV_HUGEPAGE). The next
// load must read the file back, say so, and map at least 90% of it in 2 MiB pages, with the
// logits of the first load; the load after it has nothing to read back and clears the file's
// read-back mark. Split again with the mark set (a read-back that did not help), the next load
// must not read back. Where the kernel or the file system gives this file no 2 MiB pages, keeps
// no user attributes, or the 4 KiB reads did not leave small folios, there is nothing to test:
// skipped (exit 77), saying which.
#include "model/llama.h"
#include "runtime/decoder.h"
#include "tests/check.h"
#include "tests/tool_util.h"
#include "tools/util.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#define N_TOK 4
#define MARK "user.decode.reread"        // runtime/packcache.c REREAD_XATTR

// One load from the cache directory cdir: the logits of N_TOK tokens; w's state, file and map
// note copied out.
static float *load_run(const llama_model *m, const char *cdir, int *state, char *file, char *note) {
    decoder d;
    char err[GGUF_ERR_MAX];
    decoder_opts o = decoder_default_opts(1);
    o.pack_cache = (packcache_opts){.mode = PACKCACHE_AUTO, .dir = cdir};
    CHECKF(decoder_init_opts(&d, m, 32, &o, err) == 0, "%s", err);
    int nv = m->hp.n_vocab;
    float *out = malloc(sizeof(float) * nv * N_TOK);
    CHECK(out);
    for (int i = 0; i < N_TOK; i++)
        memcpy(out + (size_t)i * nv, decoder_forward(&d, (int32_t)((i * 37 + 1) % nv), i), sizeof(float) * nv);
    *state = d.w.cache_state;
    snprintf(file, 4200, "%s", d.w.cache_file);
    snprintf(note, sizeof d.w.map_note, "%s", d.w.map_note);
    decoder_free(&d);
    return out;
}

// The share of the file in 2 MiB pages once its first half is read 4 KiB at a time (no readahead)
// and the whole then mapped with huge pages advised; -1 when it cannot be measured.
static double split_cache(const char *file) {
    int fd = open(file, O_RDONLY);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0);
    size_t n = (size_t)st.st_size;
    CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) == 0);
    char page[4096];
    for (size_t off = 0; off < n / 2; off += sizeof page) CHECK(pread(fd, page, sizeof page, (off_t)off) > 0);
    void *map = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED);
    double share = -1;
    if (madvise(map, n, MADV_HUGEPAGE) == 0 && madvise(map, n, MADV_POPULATE_READ) == 0) {
        long long pmd = packcache_pmd_bytes(map);
        share = pmd < 0 ? -1 : (double)pmd / (double)n;
    }
    munmap(map, n);
    close(fd);
    return share;
}

int main(void) {
    char *dir = scratch_dir(), *cdir = path_join(dir, "packed");
    // 8 layers of 2 MiB matrices: a file of about 70 MB, most of it in whole 2 MiB pages
    char *model = synth_model(dir, "m.gguf", "--n-embd 1024 --n-layer 8 --n-head 8 --n-kv-head 8 --n-ff 1024 "
                                             "--n-vocab 1000 --ctx 64 --dtype f16 --seed 3");
    llama_model m;
    char err[GGUF_ERR_MAX], file[4200], note[sizeof ((model_weights *)0)->map_note];
    CHECKF(llama_model_load(&m, model, err) == 0, "%s", err);
    int state, rc = 0;
    float *ref = load_run(&m, cdir, &state, file, note);
    CHECKF(state == PACKCACHE_WRITTEN, "the first load did not write the cache (state %d)", state);
    double share = split_cache(file);
    int attrs = setxattr(file, "user.decode.test", "1", 1, 0) == 0 && removexattr(file, "user.decode.test") == 0;
    if (share <= 0 || share >= 0.9 || !attrs) {
        printf("skipped: %s\n", share < 0 ? "the 2 MiB share of a mapping cannot be read here"
                                : share == 0 ? "this kernel or file system gives the file no 2 MiB pages"
                                : !attrs     ? "the file system keeps no user attributes"
                                             : "reading 4 KiB at a time left no small folios");
        rc = 77;
    } else {
        size_t bytes = sizeof(float) * m.hp.n_vocab * N_TOK;
        float *got = load_run(&m, cdir, &state, file, note);
        CHECKF(state == PACKCACHE_MAPPED, "state %d after the split", state);
        double was, now;
        CHECKF(sscanf(note,
                      "dropped from the page cache and read back into 2 MiB pages: %lf%% of it was in them, now %lf%%",
                      &was, &now) == 2,
               "no read-back note with %.0f%% of the file in 2 MiB pages: '%s'", 100 * share, note);
        CHECKF(now >= 90 && was < 90, "read back: %.0f%% before, %.0f%% after", was, now);
        CHECKF(!memcmp(got, ref, bytes), "logits differ after the read-back");
        free(got);
        got = load_run(&m, cdir, &state, file, note);
        CHECKF(state == PACKCACHE_MAPPED && !note[0], "the load after the read-back: state %d, note '%s'", state, note);
        CHECKF(!memcmp(got, ref, bytes), "logits differ on the load after the read-back");
        CHECKF(getxattr(file, MARK, NULL, 0) < 0, "the mark survived a load that found 2 MiB pages");
        free(got);
        double again = split_cache(file);
        CHECK(setxattr(file, MARK, "1", 1, 0) == 0);
        got = load_run(&m, cdir, &state, file, note);
        CHECKF(state == PACKCACHE_MAPPED && !note[0], "read back again under the mark (split to %.0f%%): '%s'",
               100 * again, note);
        CHECKF(!memcmp(got, ref, bytes) && getxattr(file, MARK, NULL, 0) >= 0,
               "marked load: logits differ or mark gone");
        free(got);
        printf("pack re-read: %.0f%% of the file in 2 MiB pages after the split, %.0f%% after the read-back\n", was,
               now);
    }
    free(ref);
    llama_model_free(&m);
    CHECK(unlink(file) == 0 && rmdir(cdir) == 0);   // the one cache file, and nothing else in its directory
    CHECK(scratch_remove(dir) == 0);
    free(model), free(cdir);
    return rc;
}
