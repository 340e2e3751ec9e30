/* LD_PRELOAD shim for tests/output/check: kills modelc with SIGKILL just
 * before its Nth rename() (N from MODELC_KILL_AT_RENAME), so that every
 * step of staging and committing can be interrupted in turn. Only modelc
 * is affected; other programs that load it (ninja, the compiler, ar) run
 * as usual. Built with the host compiler, without sanitizers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rename(const char *from, const char *to)
{
	static int calls;
	static int (*real_rename)(const char *, const char *);
	const char *at = getenv("MODELC_KILL_AT_RENAME");
	if (at && strcmp(program_invocation_short_name, "modelc") == 0 && ++calls == atoi(at))
		raise(SIGKILL);
	if (!real_rename)
		real_rename = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
	if (!real_rename) {
		errno = ENOSYS;
		return -1;
	}
	return real_rename(from, to);
}
