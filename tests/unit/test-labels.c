/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the host tier's labels (agent/base/labels.c): the systemd
 * unit and container of cgroup paths as systemd, docker, containerd,
 * CRI-O, podman and the cgroupfs driver name them, and the service each
 * gives, with the executable as the last resort.
 */
#include "fp-test.h"
#include "labels.h"
#include "upload_contract.h"

#include <stdio.h>

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void check(const char *path, const char *unit, const char *container, const char *exe,
                  const char *service)
{
        struct fp_labels l;
        char s[FP_LABEL_MAX];

        fp_labels_from_cgroup(path, &l);
        FP_CHECK_EQ_STR(l.unit, unit);
        FP_CHECK_EQ_STR(l.container, container);
        fp_labels_service(&l, exe, "comm", false, s, sizeof(s));
        FP_CHECK_EQ_STR(s, service);
        /* Every service must be one an upload may carry. */
        FP_CHECK_EQ_INT(fp_upload_check_service(s), 0);
}

int main(void)
{
        /* systemd units: a service's name without .service, as a rule's --unit names it. */
        check("/system.slice/nginx.service", "nginx.service", "", "/usr/sbin/nginx", "nginx");
        check("/system.slice/system-getty.slice/getty@tty1.service", "getty@tty1.service", "",
              "/sbin/agetty", "getty@tty1");
        /* The innermost service of a user's manager. */
        check("/user.slice/user-1000.slice/user@1000.service/app.slice/gpg-agent.service",
              "gpg-agent.service", "", "/usr/bin/gpg-agent", "gpg-agent");
        /* A scope when there is no service: a login session, a transient unit. */
        check("/user.slice/user-1000.slice/session-3.scope", "session-3.scope", "", "/bin/bash",
              "session-3.scope");
        /* Containers (systemd driver): docker, containerd under kubepods, CRI-O, podman. */
        check("/system.slice/docker-" ID ".scope", "", "0123456789ab", "/usr/bin/redis-server",
              "0123456789ab");
        check("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_5678.slice/"
              "cri-containerd-" ID ".scope",
              "", "0123456789ab", "/app", "0123456789ab");
        check("/kubepods.slice/kubepods-besteffort.slice/crio-" ID ".scope", "", "0123456789ab",
              "/app", "0123456789ab");
        /* Rootless podman: the container inside the user's manager wins over it. */
        check("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID ".scope",
              "user@1000.service", "0123456789ab", "/app", "0123456789ab");
        /* cgroupfs driver: a bare ID. */
        check("/docker/" ID, "", "0123456789ab", "/app", "0123456789ab");
        check("/kubepods/burstable/pod1234-5678/" ID, "", "0123456789ab", "/app", "0123456789ab");
        /* systemd inside a container: its service is innermost. */
        check("/system.slice/docker-" ID ".scope/system.slice/cron.service", "cron.service",
              "0123456789ab", "/usr/sbin/cron", "cron");
        /* Not containers: a short hex name, conmon's scope, a wrong length. */
        check("/system.slice/docker-0123abcd.scope", "docker-0123abcd.scope", "", "/x",
              "docker-0123abcd.scope");
        /* (conmon's scope name is past FP_LABEL_MAX: no unit, so the executable names it.) */
        check("/machine.slice/libpod-conmon-" ID ".scope", "", "", "/usr/bin/conmon", "conmon");
        /* Neither: the executable's name; without one, the process name. */
        check("/", "", "", "/usr/local/bin/batch-job", "batch-job");
        check("/fleetprof-test/plain", "", "", "/tmp/x/short-lived", "short-lived");
        check("", "", "", "", "comm");
        check("//a///b.service//", "b.service", "", "", "b");

        /* A deleted executable, names with blanks and bytes the upload contract refuses. */
        check("/", "", "", "/usr/bin/app (deleted)", "app");
        check("/", "", "", "/memfd:sealed-91173221a7ea (deleted)", "memfd:sealed-91173221a7ea");
        check("/", "", "", "/opt/my app/run\x01me", "run_me");
        check("/system.slice/my\tweird.service", "my\tweird.service", "", "/x", "my_weird");
        check("/", "", "", "/", "unknown");

        /* Kernel threads are one service. */
        struct fp_labels l;
        char s[FP_LABEL_MAX];
        fp_labels_from_cgroup("/", &l);
        fp_labels_service(&l, "", "kworker/0:1", true, s, sizeof(s));
        FP_CHECK_EQ_STR(s, "kernel");

        /* A unit name too long for the label is not cut into another's name. */
        char longpath[200] = "/system.slice/";
        for (int i = 0; i < 80; i++)
                longpath[14 + i] = 'a';
        snprintf(longpath + 94, sizeof(longpath) - 94, ".service");
        fp_labels_from_cgroup(longpath, &l);
        FP_CHECK_EQ_STR(l.unit, "");
        return FP_TEST_DONE();
}
