/* Description: a process that puts itself in a seccomp sandbox - every
 * system call not on a short list kills it, as OpenSSH's pre-authentication
 * child does - goes on using the connection it had, under RLIMIT_NOFILE 1,
 * and ends with exit() without being killed: a library in it may make no
 * system call the program would not have made on a plain socket (issue
 * #13, item 1: the shim's exit removed its files with unlink and the
 * sandbox killed it with SIGSYS; a thread that had waited in poll() before
 * the filter must not use its epoll set of doorbells after it).  Over RDMA
 * the connection moves to TCP as the filter goes in (libibverbs makes
 * system calls of its own, which such a filter forbids), and the moved
 * connection reads and writes with the calls the program made (read and
 * write here: recvmsg killed it).  A setsockopt that would move the
 * connection (SO_PEEK_OFF) fails with EOPNOTSUPP there instead. */
#include "common.h"
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
		  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static void sandbox(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		ALLOW(SYS_read), ALLOW(SYS_write), ALLOW(SYS_readv), ALLOW(SYS_writev),
		ALLOW(SYS_recvfrom), ALLOW(SYS_sendto), ALLOW(SYS_futex), ALLOW(SYS_poll),
		ALLOW(SYS_ppoll), ALLOW(SYS_clock_gettime), ALLOW(SYS_clock_nanosleep),
		ALLOW(SYS_nanosleep), ALLOW(SYS_exit), ALLOW(SYS_exit_group),
		ALLOW(SYS_rt_sigprocmask), ALLOW(SYS_rt_sigreturn), ALLOW(SYS_getpid),
		ALLOW(SYS_brk), ALLOW(SYS_mmap), ALLOW(SYS_munmap), ALLOW(SYS_madvise),
		ALLOW(SYS_close), ALLOW(SYS_shutdown), ALLOW(SYS_getrandom), ALLOW(SYS_setsockopt),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = { sizeof f / sizeof f[0], f };
	struct rlimit one = { 1, 1 };

	CHECK(setrlimit(RLIMIT_NOFILE, &one) == 0);
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), st;
	static uint8_t buf[1 << 20];

	deadline(30);
	pid_t p = fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		struct pollfd pf = { .fd = c, .events = POLLIN };
		CHECK(c >= 0);
		expect_mode_peer_forks(c);
		close(l);
		/* a byte before, waited for in poll (the client is late): the
		 * process is known to shunt and this thread has slept on its
		 * doorbells before the filter, which forbids epoll */
		CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLIN));
		read_all(c, buf, 1);
		sandbox();
		/* a megabyte each way, the first wait in poll() */
		CHECK(poll(&pf, 1, 10000) == 1 && (pf.revents & POLLIN));
		read_all(c, buf, sizeof buf);
		for (size_t i = 0; i < sizeof buf; i++)
			if (buf[i] != pattern(i, 3))
				exit(3);
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = pattern(i, 4);
		write_all(c, buf, sizeof buf);
		/* an option after which the kernel handles the stream (a
		 * peek offset; kernel TLS alike): the kernel's answer or
		 * EOPNOTSUPP - never a move or a scratch socket of shunt's,
		 * calls the filter forbids */
		int off = 0;
		CHECK(setsockopt(c, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off) == 0 || errno == EOPNOTSUPP);
		exit(0); /* exit(), destructors and all */
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);
	usleep(50000); /* the server waits in poll() */
	write_all(fd, "h", 1);
	usleep(100000); /* the server is in its sandbox, waiting in poll */
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = pattern(i, 3);
	write_all(fd, buf, sizeof buf);
	read_all(fd, buf, sizeof buf);
	for (size_t i = 0; i < sizeof buf; i++)
		CHECK(buf[i] == pattern(i, 4));
	CHECK(read(fd, buf, 1) == 0);
	CHECK(waitpid(p, &st, 0) == p);
	if (!WIFEXITED(st))
		fprintf(stderr, "the sandboxed server died of signal %d\n", WTERMSIG(st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return 0;
}
