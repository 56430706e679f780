// Writer -> reader round trips: every KV type, string arrays, tensors from pointers and from the
// fill callback (small ones through the write buffer, big ones past it), kv_copy giving a
// byte-identical file (stories260K included), and the writer's own argument errors.
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "model/gguf.h"
#include "model/gguf_write.h"
#include "tests/check.h"
#include "tests/tool_util.h"

#define BIG (20u << 20)   // larger than the writer's buffer

static char *tmpdir;

static uint8_t pattern(uint64_t index, size_t i) { return (uint8_t)(index * 131 + i * 7 + (i >> 9)); }

static int fill(void *ctx, uint64_t index, void *dst, size_t nbytes) {
    int *calls = ctx;
    ++*calls;
    for (size_t i = 0; i < nbytes; i++) ((uint8_t *)dst)[i] = pattern(index, i);
    return 0;
}
static int fill_fail(void *ctx, uint64_t index, void *dst, size_t nbytes) {
    (void)ctx; (void)index; (void)dst; (void)nbytes;
    return -1;
}

// Copies every kv and tensor of g into a new file at the same alignment.
static void copy_file(const gguf_file *g, const char *out) {
    char err[GGUF_ERR_MAX];
    gguf_writer *w = copy_writer(g);
    CHECKF(gguf_writer_save(w, out, err) == 0, "%s", err);
    gguf_writer_free(w);
}

static void check_same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = must_read(a, &na), *y = must_read(b, &nb);
    CHECKF(na == nb && !memcmp(x, y, na), "%s and %s differ (%zu vs %zu bytes)", a, b, na, nb);
    free(x); free(y);
}

static int64_t geti(const gguf_file *g, const char *key, int64_t lo, int64_t hi) {
    char err[GGUF_ERR_MAX];
    int64_t v = 0;
    CHECKF(gguf_get_int(g, key, lo, hi, &v, err) == 0, "%s", err);
    return v;
}

int main(void) {
    char path[256], path2[256], err[GGUF_ERR_MAX];
    CHECK((tmpdir = scratch_dir()));
    snprintf(path, sizeof path, "%s/a.gguf", tmpdir);
    snprintf(path2, sizeof path2, "%s/b.gguf", tmpdir);

    // ---- every KV type
    gguf_writer *w = gguf_writer_new(64);
    CHECK(w);
    uint8_t u8 = 250; int8_t i8 = -100; uint16_t u16 = 65000; int16_t i16 = -32000;
    uint64_t u64 = 0xfedcba9876543210ull; int64_t i64 = INT64_MIN; double f64 = -1.0 / 3;
    gguf_w_val(w, "t.u8", GGUF_TYPE_UINT8, &u8);
    gguf_w_val(w, "t.i8", GGUF_TYPE_INT8, &i8);
    gguf_w_val(w, "t.u16", GGUF_TYPE_UINT16, &u16);
    gguf_w_val(w, "t.i16", GGUF_TYPE_INT16, &i16);
    gguf_w_u32(w, "t.u32", 4000000000u);
    gguf_w_i32(w, "t.i32", -2000000000);
    gguf_w_f32(w, "t.f32", 1.5e-5f);
    gguf_w_bool(w, "t.bool", 1);
    gguf_w_str(w, "t.str", "hello");
    gguf_w_str_n(w, "t.str0", "a\0b\n", 4);
    gguf_w_u64(w, "t.u64", u64);
    gguf_w_val(w, "t.i64", GGUF_TYPE_INT64, &i64);
    gguf_w_val(w, "t.f64", GGUF_TYPE_FLOAT64, &f64);
    const char *strs[] = {"<unk>", "", "\xe2\x96\x81the", "x"};
    gguf_w_arr_str(w, "t.arr_str", strs, 4);
    gguf_w_arr_str(w, "t.arr_str_empty", strs, 0);
    float fv[5] = {0, -1, 2.5f, 1e30f, -0.0f};
    int32_t iv[3] = {-1, 0, 7};
    uint16_t hv[2] = {1, 65535};
    double dv[2] = {1e300, -2};
    gguf_w_arr_f32(w, "t.arr_f32", fv, 5);
    gguf_w_arr_i32(w, "t.arr_i32", iv, 3);
    gguf_w_arr(w, "t.arr_u16", GGUF_TYPE_UINT16, hv, 2);
    gguf_w_arr(w, "t.arr_f64", GGUF_TYPE_FLOAT64, dv, 2);
    gguf_w_arr(w, "t.arr_u8", GGUF_TYPE_UINT8, hv, 0);

    // ---- tensors: pointers and fill, small and larger than the write buffer
    static float wf32[3 * 5];
    for (int i = 0; i < 15; i++) wf32[i] = (float)i - 7.25f;
    uint8_t *bigp = malloc(BIG);
    CHECK(bigp);
    for (size_t i = 0; i < BIG; i++) bigp[i] = pattern(99, i);
    uint64_t ne_a[2] = {5, 3}, ne_b[1] = {7}, ne_c[3] = {64, 2, 3}, ne_d[1] = {BIG / 2}, ne_e[2] = {BIG / 4, 1};
    gguf_w_tensor(w, "a.f32", GGML_TYPE_F32, 2, ne_a, wf32);
    gguf_w_tensor(w, "b.f16.fill", GGML_TYPE_F16, 1, ne_b, NULL);
    gguf_w_tensor(w, "c.q8_0.fill", 8 /* Q8_0 */, 3, ne_c, NULL);
    gguf_w_tensor(w, "d.big.fill", GGML_TYPE_BF16, 1, ne_d, NULL);
    gguf_w_tensor(w, "e.big.ptr", GGML_TYPE_F32, 2, ne_e, bigp);
    int calls = 0;
    gguf_w_set_fill(w, fill, &calls);
    CHECKF(gguf_writer_save(w, path, err) == 0, "%s", err);
    gguf_writer_free(w);
    CHECK(calls == 3);

    gguf_file g;
    CHECKF(gguf_open(&g, path, err) == 0, "%s", err);
    CHECK(g.version == 3 && g.alignment == 64 && g.n_tensors == 5 && g.data_offset % 64 == 0);
    CHECK(g.n_kv == 21);   // 20 written + general.alignment
    CHECK(geti(&g, "general.alignment", 64, 64) == 64);
    CHECK(geti(&g, "t.u8", 0, 255) == 250 && geti(&g, "t.i8", -128, 127) == -100);
    CHECK(geti(&g, "t.u16", 0, 65535) == 65000 && geti(&g, "t.i16", INT16_MIN, 0) == -32000);
    CHECK(geti(&g, "t.u32", 0, UINT32_MAX) == 4000000000ll && geti(&g, "t.i32", INT32_MIN, 0) == -2000000000);
    CHECK(geti(&g, "t.i64", INT64_MIN, 0) == INT64_MIN);
    int64_t v;
    CHECK(gguf_get_int(&g, "t.u64", 0, INT64_MAX, &v, err) == -1 && strstr(err, "t.u64") &&
          strstr(err, "out of range"));
    CHECK(gguf_find_kv(&g, "t.u64")->type == GGUF_TYPE_UINT64 && !memcmp(gguf_find_kv(&g, "t.u64")->data, &u64, 8));
    CHECK(!memcmp(gguf_find_kv(&g, "t.f64")->data, &f64, 8) && gguf_find_kv(&g, "t.f64")->type == GGUF_TYPE_FLOAT64);
    float f; int b; const char *s; uint64_t len;
    CHECK(gguf_get_f32(&g, "t.f32", &f, err) == 0 && f == 1.5e-5f);
    CHECK(gguf_get_bool(&g, "t.bool", &b, err) == 0 && b == 1);
    CHECK(gguf_get_str(&g, "t.str", &s, &len, err) == 0 && len == 5 && !memcmp(s, "hello", 5));
    CHECK(gguf_get_str(&g, "t.str0", &s, &len, err) == 0 && len == 4 && !memcmp(s, "a\0b\n", 4));
    const gguf_kv *kv;
    CHECK(gguf_get_arr(&g, "t.arr_str", GGUF_TYPE_STRING, &kv, err) == 0 && kv->n == 4);
    for (int i = 0; i < 4; i++) {
        gguf_arr_str(kv, (uint64_t)i, &s, &len);
        CHECK(len == strlen(strs[i]) && !memcmp(s, strs[i], len));
    }
    CHECK(gguf_get_arr(&g, "t.arr_str_empty", GGUF_TYPE_STRING, &kv, err) == 0 && kv->n == 0);
    CHECK(gguf_get_arr(&g, "t.arr_f32", GGUF_TYPE_FLOAT32, &kv, err) == 0 && kv->n == 5 &&
          !memcmp(kv->data, fv, sizeof fv));
    CHECK(gguf_get_arr(&g, "t.arr_i32", GGUF_TYPE_INT32, &kv, err) == 0 && kv->n == 3 &&
          !memcmp(kv->data, iv, sizeof iv));
    CHECK(gguf_get_arr(&g, "t.arr_u16", GGUF_TYPE_UINT16, &kv, err) == 0 && kv->n == 2 &&
          !memcmp(kv->data, hv, sizeof hv));
    CHECK(gguf_get_arr(&g, "t.arr_f64", GGUF_TYPE_FLOAT64, &kv, err) == 0 && kv->n == 2 &&
          !memcmp(kv->data, dv, sizeof dv));
    CHECK(gguf_get_arr(&g, "t.arr_u8", GGUF_TYPE_UINT8, &kv, err) == 0 && kv->n == 0);
    CHECK(gguf_get_arr(&g, "t.arr_i32", GGUF_TYPE_UINT32, &kv, err) == -1 && strstr(err, "t.arr_i32"));

    const gguf_tensor *t = gguf_find_tensor(&g, "a.f32");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 5 && t->ne[1] == 3 && t->nbytes == 60 && !memcmp(t->data, wf32, 60));
    t = gguf_find_tensor(&g, "c.q8_0.fill");
    CHECK(t && t->type == 8 && t->n_dims == 3 && t->ne[2] == 3 && t->nbytes == 2 * 34 * 2 * 3);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        t = &g.tensors[i];
        CHECK(t->offset % 64 == 0);
        const uint8_t *d = t->data;
        for (size_t j = 0; j < t->nbytes; j += (t->nbytes > 4096 ? 4093 : 1))   // fill and pointer bytes
            if (i != 0) CHECKF(d[j] == pattern(i == 4 ? 99 : i, j), "tensor %llu byte %zu", (unsigned long long)i, j);
    }
    CHECK(gguf_find_tensor(&g, "e.big.ptr")->nbytes == BIG &&
          !memcmp(gguf_find_tensor(&g, "e.big.ptr")->data, bigp, BIG));

    // kv_copy + tensors re-added from the mapping reproduce the file byte for byte.
    copy_file(&g, path2);
    gguf_close(&g);
    check_same_bytes(path, path2);
    free(bigp);

    // ... stories260K too (its writer padded with zeros and laid tensors out the same way).
    CHECKF(gguf_open(&g, SHARED_DIR "/testdata/models/stories260K.gguf", err) == 0, "%s", err);
    copy_file(&g, path2);
    gguf_close(&g);
    check_same_bytes(SHARED_DIR "/testdata/models/stories260K.gguf", path2);

    // ... and a vocab-only file with no tensors.
    CHECKF(gguf_open(&g, SHARED_DIR "/testdata/vocab/ggml-vocab-llama-spm.gguf", err) == 0, "%s", err);
    copy_file(&g, path2);
    gguf_close(&g);
    CHECKF(gguf_open(&g, path2, err) == 0, "%s", err);
    CHECK(g.n_tensors == 0 && g.n_kv == 22);
    CHECK(gguf_get_arr(&g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &kv, err) == 0 && kv->n == 32000);
    gguf_close(&g);

    // ---- a replaced file keeps its permission bits (through a symbolic link too); a new one
    // gets 0666 less the umask
    {
        char lnk[300];
        snprintf(lnk, sizeof lnk, "%s/link.gguf", tmpdir);
        CHECK(chmod(path2, 0640) == 0 && symlink(path2, lnk) == 0);
        gguf_file g2;
        CHECKF(gguf_open(&g2, path2, err) == 0, "%s", err);
        w = gguf_writer_new(32);
        for (uint64_t i = 0; i < g2.n_kv; i++) gguf_w_kv_copy(w, &g2.kv[i]);
        gguf_close(&g2);
        struct stat st;
        CHECKF(gguf_writer_save(w, path2, err) == 0, "%s", err);
        CHECK(stat(path2, &st) == 0 && (st.st_mode & 07777) == 0640);
        CHECK(chmod(path2, 0600) == 0);
        CHECKF(gguf_writer_save(w, lnk, err) == 0, "%s", err);
        CHECK(lstat(lnk, &st) == 0 && S_ISLNK(st.st_mode) && stat(path2, &st) == 0 && (st.st_mode & 07777) == 0600);
        snprintf(lnk, sizeof lnk, "%s/new.gguf", tmpdir);
        mode_t um = umask(022);
        CHECKF(gguf_writer_save(w, lnk, err) == 0, "%s", err);
        umask(um);
        CHECK(stat(lnk, &st) == 0 && (st.st_mode & 07777) == 0644);
        gguf_writer_free(w);
    }

    // An empty path is refused before anything is written (lstat's ENOENT once read it as a new
    // file: the whole model went to a temporary file in the working directory, then the rename failed).
    w = gguf_writer_new(32);
    gguf_w_u32(w, "k", 1);
    CHECKF(gguf_writer_save(w, "", err) == -1 && !strcmp(err, "the output path is empty"), "'%s'", err);
    // ... and so is a missing path ending in '/', or one whose directory is missing, each said as
    // such (both read "cannot create a temporary file: No such file or directory")
    char miss[300];
    snprintf(miss, sizeof miss, "%s/nodir/", tmpdir);
    CHECKF(gguf_writer_save(w, miss, err) == -1 && strstr(err, "ends in '/'"), "'%s'", err);
    snprintf(miss, sizeof miss, "%s/nodir/x.gguf", tmpdir);
    CHECKF(gguf_writer_save(w, miss, err) == -1 && strstr(err, "its directory does not exist"), "'%s'", err);
    snprintf(miss, sizeof miss, "%s/nodir", tmpdir);
    CHECK(access(miss, F_OK) != 0);
    // a directory that exists but takes no new files (procfs) is not called missing
    struct stat pst;
    if (stat("/proc/self", &pst) == 0)
        CHECKF(gguf_writer_save(w, "/proc/no-such.gguf", err) == -1 && !strstr(err, "does not exist") &&
               strstr(err, "cannot create a temporary file"), "'%s'", err);
    // an existing file the caller may not write is not replaced, though its directory would take
    // the rename: as root, a child that became nobody tries a root-owned 0644 file in a 0777
    // directory; otherwise the file is made 0444
    char ro[320], rodir[300];
    snprintf(rodir, sizeof rodir, "%s/ro", tmpdir);
    snprintf(ro, sizeof ro, "%s/keep.gguf", rodir);
    CHECK(mkdir(rodir, 0777) == 0 && chmod(rodir, 0777) == 0);
    FILE *rf = fopen(ro, "wb");
    CHECK(rf && fputs("keep", rf) >= 0 && fclose(rf) == 0 && chmod(ro, geteuid() ? 0444 : 0644) == 0);
    struct stat tst;
    CHECK(stat(tmpdir, &tst) == 0 && chmod(tmpdir, 0755) == 0);   // nobody must reach the file
    pid_t child = fork();
    if (child == 0) {                 // 77: this sandbox cannot show it (no setuid, or nobody cannot reach the file)
        struct stat rst;
        if (geteuid() == 0 && (setgid(65534) || setuid(65534))) _exit(77);
        if (lstat(ro, &rst)) _exit(77);
        char e2[GGUF_ERR_MAX];
        int ok = gguf_writer_save(w, ro, e2) == -1 && strstr(e2, "not writable") && strstr(e2, "not replacing");
        if (!ok) fprintf(stderr, "read-only target: '%s'\n", e2);
        _exit(ok ? 0 : 1);
    }
    int cst = -1;
    CHECK(child > 0 && waitpid(child, &cst, 0) == child);
    if (WIFEXITED(cst) && WEXITSTATUS(cst) == 77)
        printf("test_gguf_write: read-only target skipped: nobody cannot reach %s here\n", ro);
    else CHECKF(WIFEXITED(cst) && WEXITSTATUS(cst) == 0, "read-only target: child status %d", cst);
    CHECK(chmod(tmpdir, tst.st_mode & 07777) == 0);
    size_t rlen;
    char *kept = must_read(ro, &rlen);
    CHECK(rlen == 4 && !memcmp(kept, "keep", 4));
    free(kept);
    CHECK(unlink(ro) == 0 && rmdir(rodir) == 0);
    gguf_writer_free(w);

    // ---- argument errors surface at save, and no file is left behind
    struct { const char *what; int id; } bad[] = {
        {"duplicate key", 0}, {"name", 1}, {"general.alignment", 2}, {"fill callback", 3},
        {"alignment", 4}, {"duplicate tensor", 5}, {"multiple", 6}, {"unknown tensor type", 7},
        {"n_dims", 8}, {"empty key", 9}, {"no data", 10}, {"alignment 2 is too small", 11},
    };
    int n_bad = 0;
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char out[300];
        snprintf(out, sizeof out, "%s/bad%zu.gguf", tmpdir, k);
        w = gguf_writer_new(bad[k].id == 4 ? 48 : bad[k].id == 11 ? 2 : 32);
        uint64_t ne[2] = {64, 2};
        gguf_w_u32(w, "k", 1);
        switch (bad[k].id) {
        case 0: gguf_w_str(w, "k", "again"); break;
        case 1:
            gguf_w_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123", 0, 1, ne, wf32);
            break;
        case 2: gguf_w_u32(w, "general.alignment", 64); break;
        case 3: gguf_w_tensor(w, "x", GGML_TYPE_F32, 1, ne, NULL); gguf_w_set_fill(w, fill_fail, NULL); break;
        case 5: gguf_w_tensor(w, "x", 0, 1, ne, wf32); gguf_w_tensor(w, "x", 0, 1, ne, wf32); break;
        case 6: ne[0] = 33; gguf_w_tensor(w, "x", 2 /* Q4_0 */, 2, ne, wf32); break;
        case 7: gguf_w_tensor(w, "x", 4, 2, ne, wf32); break;
        case 8: gguf_w_tensor(w, "x", 0, 5, ne, wf32); break;
        case 9: gguf_w_u32(w, "", 1); break;
        case 10: gguf_w_tensor(w, "x", 0, 1, ne, NULL); break;
        case 11:       // F32 at 0, F16 at 4, F32 at 6: one of the F32s is off its 4 bytes
            ne[0] = 1;
            gguf_w_tensor(w, "a", GGML_TYPE_F32, 1, ne, wf32);
            gguf_w_tensor(w, "b", GGML_TYPE_F16, 1, ne, wf32);
            gguf_w_tensor(w, "c", GGML_TYPE_F32, 1, ne, wf32);
            break;
        }
        err[0] = 0;
        CHECKF(gguf_writer_save(w, out, err) == -1, "case %s saved", bad[k].what);
        CHECKF(strstr(err, bad[k].what) && strstr(err, out), "case %s: '%s'", bad[k].what, err);
        CHECKF(access(out, F_OK) != 0, "%s exists", out);
        gguf_writer_free(w);
        n_bad++;
    }
    CHECK(n_bad == 12);
    CHECK(scratch_remove(tmpdir) == 0);
    printf("test_gguf_write: round trips ok, %d writer errors rejected\n", n_bad);
    return 0;
}
