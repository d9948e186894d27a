/* Description: a process that listened on 30 ports in turn (a connection
 * accepted on each, then closed) holds about as many descriptors as after
 * the first - under shunt at most 16 more (the registries of ports it no
 * longer listens on, kept a while: a connect of another thread may still
 * read one) - and a child it forks then holds as many as a child forked
 * after the first port.  shunt kept each port's registry mapped with a
 * descriptor for the process's life, and handed them to every child, so
 * a child near its limit met EMFILE sooner than under TCP
 * (tests/behave/fd_limit_files over RDMA found it). */
#include "common.h"
#include <dirent.h>
#include <pthread.h>

#define PORTS 30

/* A child's count of its descriptors. */
static int child_count(void)
{
	int p[2], n = -1, st;
	pid_t pid;

	CHECK(pipe(p) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int k = count_fds() - 2; /* less the pipe's two */
		CHECK(write(p[1], &k, sizeof k) == (ssize_t)sizeof k);
		_exit(0);
	}
	CHECK(read(p[0], &n, sizeof n) == (ssize_t)sizeof n);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(p[0]);
	close(p[1]);
	return n;
}

static void *acceptor(void *arg)
{
	int l = *(int *)arg, a = accept(l, NULL, NULL);
	char b;

	CHECK(a >= 0 && recv(a, &b, 1, MSG_WAITALL) == 1);
	close(a);
	return NULL;
}

static void one_port(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len), c;
	pthread_t t;
	char b = 'x';

	CHECK(pthread_create(&t, NULL, acceptor, &l) == 0);
	c = connect_to(&ss, len);
	expect_mode(c);
	CHECK(send(c, &b, 1, 0) == 1);
	pthread_join(t, NULL);
	close(c);
	close(l);
}

int main(void)
{
	int first, later, own_first, own_later;

	deadline(60);
	one_port();
	first = child_count();
	own_first = count_fds();
	for (int i = 1; i < PORTS; i++)
		one_port();
	later = child_count();
	own_later = count_fds();
	fprintf(stderr, "descriptors after one port and after %d: a child's %d, %d; the process's %d, %d\n",
		PORTS, first, later, own_first, own_later);
	CHECK(later <= first + 1);
	CHECK(own_later <= own_first + 17);
	return 0;
}
