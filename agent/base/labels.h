/* SPDX-License-Identifier: MIT */
/*
 * The labels people filter a host's samples by, from a task's cgroup v2
 * path and its executable: the systemd unit, the container, and the
 * service those give.
 *
 *   unit       the innermost path component that names a systemd service
 *              ("nginx.service"), else the innermost other scope
 *              ("session-3.scope"), container scopes excepted; "" if none
 *   container  the innermost container ID, as the runtimes name their
 *              cgroups: docker-ID.scope, cri-containerd-ID.scope,
 *              crio-ID.scope, libpod-ID.scope (systemd driver), or a bare
 *              64-hex-digit component (cgroupfs driver: /docker/ID,
 *              /kubepods/burstable/podUID/ID); its first 12 digits, as
 *              docker ps shows them; "" if none
 *   service    the innermost of the unit and the container: the unit
 *              without ".service" (as a rule's --unit names its service),
 *              or the container; with neither, the executable's file name
 *              (else the process name); "kernel" for kernel threads;
 *              always a name the upload contract takes (1 to 63 letters,
 *              digits, '.', '-', '_', '@', ':'; others become '_')
 *
 * Pure string work: nothing is read here.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define FP_LABEL_MAX 64

struct fp_labels {
        char unit[FP_LABEL_MAX];
        char container[16];
        bool container_inner; /* the container is inside the unit (podman under user@.service) */
};

/* The unit and container of a cgroup path ("/system.slice/nginx.service"). */
void fp_labels_from_cgroup(const char *path, struct fp_labels *ret);
/*
 * The service of a task with labels l, executable exe ("" unknown) and
 * name comm, into buf; kthread: a kernel thread (no user memory).
 */
void fp_labels_service(const struct fp_labels *l, const char *exe, const char *comm, bool kthread,
                       char *buf, size_t len);
