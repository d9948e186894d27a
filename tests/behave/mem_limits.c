/* Description: a process whose memory limits leave no room for a
 * shared-memory arena - RLIMIT_AS just above what it uses, or
 * mlockall(MCL_FUTURE) without CAP_IPC_LOCK and an RLIMIT_MEMLOCK below an
 * arena (every later mapping is locked and counted) - connects and
 * accepts as over TCP: the bytes arrive intact both ways, and a client
 * that could not map an arena stays plain with reason resource-limit (3).
 * Before, the server's answer named an arena the client could not map,
 * and the connection was ended (the program read EOF, its write EPIPE).
 * A root process that locked its future memory keeps its connections
 * accelerated (its arenas are locked too). */
#include "common.h"
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/capability.h>

#define N 4

/* An echo of N connections of 4 KiB each way, the server in a process of
 * its own (limited first when server_limit), the client limited too when
 * client_limit: 1 RLIMIT_AS, 2 mlockall(MCL_FUTURE) without CAP_IPC_LOCK,
 * 3 mlockall(MCL_FUTURE) as root. */
static long vm_kb(const char *what)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	CHECK(f);
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, what, strlen(what)))
			sscanf(line + strlen(what), "%ld", &v);
	fclose(f);
	return v;
}

static void limit(int how)
{
	struct rlimit rl;

	if (how == 1) { /* the address space: what it has, and 8 MiB (an arena takes 16) */
		rl.rlim_cur = rl.rlim_max = (rlim_t)(vm_kb("VmSize:") + 8192) * 1024;
		CHECK(!setrlimit(RLIMIT_AS, &rl));
	} else if (how == 2) { /* as an unprivileged user: no CAP_IPC_LOCK, 8 MiB to lock */
		struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct d[2];
		CHECK(!syscall(SYS_capget, &h, d));
		d[0].effective &= ~(1u << CAP_IPC_LOCK);
		d[0].permitted &= ~(1u << CAP_IPC_LOCK);
		d[0].inheritable &= ~(1u << CAP_IPC_LOCK);
		CHECK(!syscall(SYS_capset, &h, d));
		rl.rlim_cur = rl.rlim_max = 8u << 20;
		CHECK(!setrlimit(RLIMIT_MEMLOCK, &rl));
		CHECK(!mlockall(MCL_FUTURE));
	} else if (how == 3) {
		CHECK(!mlockall(MCL_FUTURE));
	}
}

static void echo_server(int l, int how)
{
	static char b[4096];

	limit(how);
	for (int i = 0; i < N; i++) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		read_all(c, b, sizeof b);
		write_all(c, b, sizeof b);
		CHECK(read(c, b, 1) == 0);
		close(c);
	}
	_exit(0);
}

static void client(const struct sockaddr_storage *ss, socklen_t len, int how, int server_how)
{
	static char out[4096], in[4096];
	const char *want = getenv("SHUNT_EXPECT");

	limit(how);
	for (int i = 0; i < N; i++) {
		int fd = connect_to(ss, len);
		for (size_t k = 0; k < sizeof out; k++)
			out[k] = (char)pattern(k, (uint32_t)(i + 10 * how));
		write_all(fd, out, sizeof out);
		read_all(fd, in, sizeof in);
		CHECK(!memcmp(in, out, sizeof out));
		if (want && !strcmp(want, "shm") && (how == 1 || how == 2))
			expect_plain_reason(fd, 3);
		else if (want && !strcmp(want, "shm") && !server_how)
			expect_mode(fd); /* (root's locked memory: still an arena) */
		close(fd);
	}
}

static void run(int client_how, int server_how)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pid_t srv = fork(), cl;

	CHECK(srv >= 0);
	if (!srv)
		echo_server(l, server_how);
	close(l);
	CHECK((cl = fork()) >= 0);
	if (!cl) { /* (the limits are this process's alone) */
		client(&ss, len, client_how, server_how);
		_exit(0);
	}
	CHECK(wait_child(cl) == 0);
	CHECK(wait_child(srv) == 0);
	printf("mem_limits: client %d, server %d: ok\n", client_how, server_how);
}

int main(void)
{
	if (getenv("ASAN_OPTIONS")) {
		printf("skip: memory limits and ASan's shadow memory do not mix\n");
		return 77;
	}
	deadline(60);
	run(1, 0);
	run(0, 1);
	if (geteuid() == 0) {
		run(2, 0);
		run(0, 2);
		run(3, 0);
	}
	return 0;
}
