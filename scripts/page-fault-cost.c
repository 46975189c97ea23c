/*
 * What a first touch of a fresh anonymous page costs on this machine, per
 * 4 KiB page: faulted in one at a time by a write, populated in one call
 * with madvise(MADV_POPULATE_WRITE) first, and faulted plus written twice
 * (memset) for scale. CPU time of the process, 10 rounds of 64 MiB each.
 * The figures the writer's page-fault notes quote (docs/bench-notes/
 * client.md, "Tenth pass") come from this:
 *
 *   gcc -O2 scripts/page-fault-cost.c -o /tmp/page-fault-cost && /tmp/page-fault-cost
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

enum { REGION_BYTES = 64 << 20, ROUNDS = 10, PAGE_BYTES = 4096 };

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static char *fresh(void) {
    char *p = mmap(0, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

int main(void) {
    double faulted = 0, populated = 0, written = 0;
    for (int round = 0; round < ROUNDS; round++) {
        char *p = fresh();
        double t = cpu_ns();
        for (size_t i = 0; i < REGION_BYTES; i += PAGE_BYTES) p[i] = 1;
        faulted += cpu_ns() - t;
        munmap(p, REGION_BYTES);

        p = fresh();
        t = cpu_ns();
        if (madvise(p, REGION_BYTES, MADV_POPULATE_WRITE) != 0) perror("madvise");
        for (size_t i = 0; i < REGION_BYTES; i += PAGE_BYTES) p[i] = 1;
        populated += cpu_ns() - t;
        munmap(p, REGION_BYTES);

        p = fresh();
        t = cpu_ns();
        memset(p, 0, REGION_BYTES);
        memset(p, 1, REGION_BYTES);
        written += cpu_ns() - t;
        munmap(p, REGION_BYTES);
    }
    double pages = (double)REGION_BYTES / PAGE_BYTES * ROUNDS;
    printf("a page faulted in by a write: %.0f ns; populated first: %.0f ns; "
           "faulted and written twice: %.0f ns\n",
           faulted / pages, populated / pages, written / pages);
    return 0;
}
