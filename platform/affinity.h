// The CPUs this process may run on, and pinning, for any CPU count. A cpu_set_t holds CPUs
// 0..1023 and sched_getaffinity refuses one (EINVAL) where the kernel counts more CPUs, so the
// masks here are sized at run time (CPU_ALLOC) and grown until the kernel takes them.
#pragma once
#include <pthread.h>

// The allowed CPUs' ids, ascending, in *cpus (malloc'd; the caller frees it); returns their
// count, or -1 with errno set (*cpus NULL). On a thread that holds affinity_pin_self pins, the
// CPUs it was allowed before the first pin: a second pool or topology made while a first pool
// holds its caller sees the CPUs the process may use, not the one CPU it was pinned to.
int affinity_cpus(int **cpus);
// Confines thread t to the n CPUs listed (a negative id, or one of 2^22 or more, is skipped): 0,
// or an error number (pthread_setaffinity_np's, or ENOMEM).
int affinity_set(pthread_t t, const int *cpus, int n);
// Pins the calling thread to one CPU, saving its mask on the first pin (0, or an error number;
// a failed pin holds nothing). Pins nest and may be dropped in any order: affinity_unpin_self(cpu)
// on the same thread drops the newest pin to cpu, the thread goes back to the newest pin left,
// and once none is left to the saved mask.
int affinity_pin_self(int cpu);
void affinity_unpin_self(int cpu);
