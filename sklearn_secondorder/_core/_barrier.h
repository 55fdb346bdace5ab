/* A barrier for the threads of one shared pass (_psa_fast's rounds).
 *
 * The threads meet once per round of a few dozen rows, thousands of times
 * a pass, so waiting must cost well under a microsecond: a waiting thread
 * spins on the barrier's sense (a sense-reversing barrier), and yields its
 * core after 256 spins so that more threads than cores still progress. A
 * thread that cannot take part (its start failed) sets `abort`: every wait
 * then returns 0 and the threads leave their pass.
 */
#ifndef SKSO_BARRIER_H
#define SKSO_BARRIER_H

#if defined(_WIN32)
#include <windows.h>
#define SKSO_YIELD() SwitchToThread()
#else
#include <sched.h>
#define SKSO_YIELD() sched_yield()
#endif

#if defined(__x86_64__) || defined(__i386__)
#define SKSO_PAUSE() __builtin_ia32_pause()
#else
#define SKSO_PAUSE() ((void)0)
#endif

typedef struct {
    int n;          /* the threads that meet */
    int count;      /* how many have arrived in the current round */
    int sense;      /* flips when the last one arrives */
    int abort;
} skso_barrier;

static inline void skso_barrier_init(skso_barrier *b, int n) {
    b->n = n;
    b->count = 0;
    b->sense = 0;
    b->abort = 0;
}

/* The next item of a shared queue: `*next`, then one more (a counter the
 * threads draw from between two meetings; the barriers order the rest). */
static inline long skso_draw(long *next) {
    return __atomic_fetch_add(next, 1, __ATOMIC_RELAXED);
}

static inline void skso_barrier_abort(skso_barrier *b) {
    __atomic_store_n(&b->abort, 1, __ATOMIC_RELEASE);
}

/* Wait until all n threads have arrived; `local_sense` is the calling
 * thread's own (0 at its first wait). What a thread wrote before its wait
 * is visible to every thread after theirs. Returns 0 when aborted. */
static inline int skso_barrier_wait(skso_barrier *b, int *local_sense) {
    int sense = 1 - *local_sense;
    unsigned spins = 0;
    *local_sense = sense;
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == b->n) {
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->sense, sense, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(&b->sense, __ATOMIC_ACQUIRE) != sense) {
            if (__atomic_load_n(&b->abort, __ATOMIC_ACQUIRE))
                return 0;
            if (++spins < 256) {
                SKSO_PAUSE();
            } else {
                SKSO_YIELD();
            }
        }
    }
    return !__atomic_load_n(&b->abort, __ATOMIC_ACQUIRE);
}

#endif
