// A futex word with a count of its sleepers beside it, so that a waker with nobody asleep makes no
// system call (a FUTEX_WAKE with no waiter took ~230 ns on a Zen 4 VM). Waker and sleeper meet
// Dekker-style: the waker stores the word, then reads the count; a sleeper counts itself, then
// rereads the word before it sleeps. Both sides seq_cst (the waker's store too: do not weaken
// it), so at least one sees the other and no wake-up is lost; the kernel rechecks the word.
#pragma once
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

// Wakes every sleeper on word, whose change the caller has just stored (seq_cst), if any.
static inline void futex_wake_counted(atomic_uint *word, atomic_uint *sleepers) {
    if (atomic_load_explicit(sleepers, memory_order_seq_cst))
        syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

// Sleeps while *word == val, counted in *sleepers meanwhile; returns at a change, a wake-up, or
// spuriously (a signal): the caller rereads the word and loops.
static inline void futex_sleep_counted(atomic_uint *word, atomic_uint *sleepers, unsigned val) {
    atomic_fetch_add_explicit(sleepers, 1, memory_order_seq_cst);
    if (atomic_load_explicit(word, memory_order_seq_cst) == val)
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
    atomic_fetch_sub_explicit(sleepers, 1, memory_order_seq_cst);
}
