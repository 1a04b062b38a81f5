/* SPDX-License-Identifier: MIT */
/*
 * The types a runtime's frames are found and named with (runtimes.h), on
 * their own so that each runtime's folder and the table that calls them
 * share them without including each other.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A frame as a stack's walk met it (stackwalk.c). */
struct fp_rt_frame_at {
        uint64_t ip, bp;      /* its code address and frame pointer */
        const uint8_t *stack; /* the sample's stack copy, from sp on */
        uint64_t sp, size;
};

/* What became of one process's frames of a runtime's code (monotonic counts). */
struct fp_rt_stats {
        char runtime[40];        /* the runtime recognised ("V8 11.3.244"), "" none */
        char refused[200];       /* why one was not read, "" */
        uint64_t frames;         /* frames named as its functions */
        uint64_t typed;          /* frames of its code that run no function (stubs, entries) */
        uint64_t no_function;    /* frames whose function slot held none: native */
        uint64_t unreadable;     /* frames whose function did not read: native */
        uint64_t functions;      /* functions read */
        uint64_t functions_full; /* frames past the process's bound of functions: native */
};

/* A runtime's frame's names, valid while the process's maps live. */
struct fp_rt_name {
        const char *function;
        const char *filename; /* "" when unknown */
        int64_t line;         /* the function's first line, 0 unknown */
};
