/* Description: listeners come and go without leaving anything behind:
 * 30 listeners on ephemeral ports, each serving one connection and then
 * closed, leave the rendezvous directory as they found it; and a listener
 * closed and opened again on the same port is found again by a client
 * that connected to the first one (issue #13, item 9: a registry file per
 * port ever listened on stayed for good). */
#include "common.h"
#include <dirent.h>
#include <pthread.h>

/* Is there a registry file for the port of this address?  (Only our own
 * ports are looked at: other programs share the directory.) */
static int registry_exists(const struct sockaddr_storage *ss)
{
	const char *dir = getenv("SHUNT_DIR");
	char path[512];
	unsigned port = ntohs(ss->ss_family == AF_INET6 ? ((struct sockaddr_in6 *)ss)->sin6_port
							 : ((struct sockaddr_in *)ss)->sin_port);

	if (!dir)
		return 0;
	snprintf(path, sizeof path, "%s/p%u", dir, port);
	return access(path, F_OK) == 0;
}

/* the server's side of serve_one, in a thread: connect() under shunt
 * waits for the accept */
static void *accept_one(void *arg)
{
	int a = accept(*(int *)arg, NULL, NULL);
	char b;

	CHECK(a >= 0);
	read_all(a, &b, 1);
	close(a);
	return NULL;
}

/* one connection to l: accepted, a byte sent, closed by the server */
static void serve_one(int l, const struct sockaddr_storage *ss, socklen_t len)
{
	pthread_t t;
	char b;

	CHECK(pthread_create(&t, NULL, accept_one, &l) == 0);
	int c = connect_to(ss, len);
	expect_mode(c);
	write_all(c, "x", 1);
	CHECK(read(c, &b, 1) == 0);
	close(c);
	pthread_join(t, NULL);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l;

	deadline(60);
	for (int i = 0; i < 30; i++) {
		l = listen_on("127.0.0.1", &ss, &len);
		serve_one(l, &ss, len);
		close(l);
		if (registry_exists(&ss)) {
			fprintf(stderr, "listener %d closed, its port's registry file is still there\n", i);
			return 1;
		}
	}
	/* the same port again: the client's view of it must follow */
	l = listen_on("127.0.0.1", &ss, &len);
	serve_one(l, &ss, len);
	close(l);
	l = socket(ss.ss_family, SOCK_STREAM, 0);
	CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int)) == 0);
	CHECK(bind(l, (void *)&ss, len) == 0 && listen(l, 8) == 0);
	serve_one(l, &ss, len);
	close(l);

	/* and a client in another process, which mapped the first file */
	int go[2], done[2];
	char b;
	CHECK(pipe(go) == 0 && pipe(done) == 0);
	l = socket(ss.ss_family, SOCK_STREAM, 0);
	CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int)) == 0);
	CHECK(bind(l, (void *)&ss, len) == 0 && listen(l, 8) == 0);
	pid_t p = fork();
	if (!p) {
		close(l); /* the parent's to close and open again */
		for (int i = 0; i < 2; i++) {
			CHECK(read(go[0], &b, 1) == 1);
			int c = connect_to(&ss, len);
			expect_mode(c);
			write_all(c, "x", 1);
			CHECK(read(c, &b, 1) == 0);
			close(c);
			write_all(done[1], "d", 1);
		}
		_exit(0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, accept_one, &l) == 0);
		write_all(go[1], "g", 1);
		pthread_join(t, NULL);
		CHECK(read(done[0], &b, 1) == 1);
		close(l); /* its registry goes; a new one comes with the next */
		if (i)
			break;
		l = socket(ss.ss_family, SOCK_STREAM, 0);
		CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int)) == 0);
		CHECK(bind(l, (void *)&ss, len) == 0 && listen(l, 8) == 0);
	}
	CHECK(wait_child(p) == 0);
	/* the child had a copy of the listener and of its lock: none left */
	if (registry_exists(&ss)) {
		fprintf(stderr, "the last listener closed, its port's registry file is still there\n");
		return 1;
	}
	return 0;
}
