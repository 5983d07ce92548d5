/* LD_PRELOAD library that makes an unpinned process see FAKE_NCPUS CPUs, to emulate a big
 * node on a small machine. A process pinned to fewer CPUs than are online is told the truth,
 * which is what a capped child is. Only sched_getaffinity is interposed: it is what XLA's
 * and LLVM's thread pools are sized from. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/sysinfo.h>

int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *mask) {
    static int (*real)(pid_t, size_t, cpu_set_t *) = NULL;
    if (!real) real = (int (*)(pid_t, size_t, cpu_set_t *))dlsym(RTLD_NEXT, "sched_getaffinity");
    int rc = real(pid, size, mask);
    const char *fake = getenv("FAKE_NCPUS");
    if (rc != 0 || fake == NULL) return rc;
    if (CPU_COUNT_S(size, mask) < get_nprocs()) return rc;
    int n = atoi(fake);
    if ((size_t)n > size * 8) {  /* as the kernel says of a mask too small: the caller grows it */
        errno = EINVAL;
        return -1;
    }
    CPU_ZERO_S(size, mask);
    for (int i = 0; i < n; i++) CPU_SET_S(i, size, mask);
    return rc;
}
