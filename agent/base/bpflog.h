/* SPDX-License-Identifier: MIT */
/*
 * What libbpf says while the agent loads a BPF object (tracker.c,
 * offcpu.c): its last warning or error, kept as one line, which is the
 * reason a load failed. Debug messages are dropped. Loads run on the
 * event loop thread, one at a time.
 */
#pragma once

/* Forgets the last message and takes libbpf's messages from now on. */
void fp_bpflog_begin(void);
/* Gives libbpf its own printing back. */
void fp_bpflog_end(void);
/* ": MESSAGE" of the last message since fp_bpflog_begin(), or "" when none. */
const char *fp_bpflog_suffix(void);
