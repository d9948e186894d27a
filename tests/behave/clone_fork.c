/* Description: a server that makes its connection's process with clone()
 * instead of fork() - the system call through syscall() (vsftpd's
 * isolated session processes: clone with CLONE_NEWNET, CLONE_NEWIPC), the
 * clone3 system call, or libc's clone() without CLONE_VM - and closes its
 * own copy at once, as a forking server does: the child serves the
 * connection, every byte both ways, and the client reads the child's end.
 * No fork handler runs for such a child: with the previous library it
 * took itself for its parent, the parent's close ended the connection
 * under it, the client's request went to the bare socket and the child
 * waited on the ring for ever (vsftpd's "FEAT" after its banner). */
#include "common.h"
#include <linux/sched.h>
#include <sched.h>
#include <sys/syscall.h>

#define REQ 100000

static int conn, go[2];

static int serve(void *arg)
{
	static char buf[REQ];

	(void)arg;
	read_all(conn, buf, REQ);
	for (int i = 0; i < REQ; i++)
		CHECK(buf[i] == (char)(i * 7));
	write_all(conn, buf, REQ);
	CHECK(read(conn, buf, 1) == 0); /* the client's end */
	close(conn);
	_exit(0);
}

static void client(const struct sockaddr_storage *ss, socklen_t len)
{
	static char buf[REQ];
	int c = connect_to(ss, len);
	char b;

	expect_mode_peer_forks(c);
	CHECK(read(go[0], &b, 1) == 1); /* the server's parent has let go */
	for (int i = 0; i < REQ; i++)
		buf[i] = (char)(i * 7);
	write_all(c, buf, REQ);
	memset(buf, 0, sizeof buf);
	read_all(c, buf, REQ);
	for (int i = 0; i < REQ; i++)
		CHECK(buf[i] == (char)(i * 7));
	close(c);
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	static char stack[256 * 1024];

	deadline(60);
	for (int how = 0; how < 3; how++) {
		pid_t cl, srv;
		CHECK(pipe(go) == 0);
		CHECK((cl = fork()) >= 0);
		if (!cl)
			client(&ss, len);
		CHECK((conn = accept(l, NULL, NULL)) >= 0);
		if (how == 0) {
			srv = (pid_t)syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
		} else if (how == 1) {
			struct clone_args a = { .exit_signal = SIGCHLD };
			srv = (pid_t)syscall(SYS_clone3, &a, sizeof a);
		} else {
			srv = clone(serve, stack + sizeof stack, SIGCHLD, NULL);
		}
		CHECK(srv >= 0);
		if (!srv)
			serve(NULL); /* the system call's child, on this stack */
		close(conn); /* the parent lets go at once, as a forking server */
		CHECK(write(go[1], "g", 1) == 1);
		close(go[0]);
		close(go[1]);
		if (wait_child(srv) != 0 || wait_child(cl) != 0) {
			fprintf(stderr, "round %d (%s): failed\n", how,
				how == 0 ? "clone" : how == 1 ? "clone3" : "libc clone()");
			return 1;
		}
	}
	return 0;
}
