// CPU masks sized at run time (platform/affinity.h).
#include "platform/affinity.h"
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CPUS (1 << 22)    // the kernel's own NR_CPUS limit is 8192; this only stops the loop

// The calling thread's CPUs before its first pin, and the CPUs of the pins it holds, oldest
// first (affinity_pin_self): the thread runs on the newest.
static _Thread_local int *held_cpus, held_n, *pins, held_pins, pins_cap;

static int allowed_now(int **cpus) {
    *cpus = NULL;
    for (int bits = 1024; bits <= MAX_CPUS; bits *= 2) {
        cpu_set_t *s = CPU_ALLOC(bits);
        if (!s) return -1;
        size_t size = CPU_ALLOC_SIZE(bits);
        if (sched_getaffinity(0, size, s) != 0) {
            int e = errno;
            CPU_FREE(s);
            if (e != EINVAL) return errno = e, -1;
            continue;                     // the kernel counts more CPUs: a bigger mask
        }
        int n = CPU_COUNT_S(size, s), k = 0;
        int *c = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
        for (int i = 0; c && i < bits && k < n; i++)
            if (CPU_ISSET_S(i, size, s)) c[k++] = i;
        CPU_FREE(s);
        if (!c) return errno = ENOMEM, -1;
        *cpus = c;
        return k;
    }
    return errno = EINVAL, -1;
}

int affinity_cpus(int **cpus) {
    if (!held_pins) return allowed_now(cpus);
    if (!(*cpus = malloc(sizeof(int) * (size_t)held_n))) return errno = ENOMEM, -1;
    memcpy(*cpus, held_cpus, sizeof(int) * (size_t)held_n);
    return held_n;
}

int affinity_set(pthread_t t, const int *cpus, int n) {
    int top = 0;
    for (int i = 0; i < n; i++)
        if (cpus[i] > top && cpus[i] < MAX_CPUS) top = cpus[i];
    cpu_set_t *s = CPU_ALLOC(top + 1);
    if (!s) return ENOMEM;
    size_t size = CPU_ALLOC_SIZE(top + 1);
    CPU_ZERO_S(size, s);
    for (int i = 0; i < n; i++)
        if (cpus[i] >= 0 && cpus[i] <= top) CPU_SET_S(cpus[i], size, s);
    int rc = pthread_setaffinity_np(t, size, s);
    CPU_FREE(s);
    return rc;
}

int affinity_pin_self(int cpu) {
    if (held_pins == pins_cap) {
        int cap = pins_cap ? 2 * pins_cap : 4, *p = realloc(pins, sizeof(int) * (size_t)cap);
        if (!p) return ENOMEM;
        pins = p, pins_cap = cap;
    }
    if (!held_pins && (held_n = allowed_now(&held_cpus)) < 1) {
        free(held_cpus), held_cpus = NULL;
        return held_n < 0 ? errno : EINVAL;
    }
    int rc = affinity_set(pthread_self(), &cpu, 1);
    if (!rc) pins[held_pins++] = cpu;
    else if (!held_pins) free(held_cpus), held_cpus = NULL;
    return rc;
}

void affinity_unpin_self(int cpu) {
    int i = held_pins - 1;
    while (i >= 0 && pins[i] != cpu) i--;
    if (i < 0) return;
    int newest = i == held_pins - 1;
    for (; i + 1 < held_pins; i++) pins[i] = pins[i + 1];
    if (--held_pins) {                   // back on the newest pin still held
        if (newest) affinity_set(pthread_self(), &pins[held_pins - 1], 1);
        return;
    }
    affinity_set(pthread_self(), held_cpus, held_n);
    free(held_cpus), held_cpus = NULL;
    free(pins), pins = NULL, pins_cap = 0;
}
