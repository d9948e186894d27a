/* Description: sixteen threads of a fresh process connect to one server at
 * the same moment, sixteen server threads accept at once (its first connections: no link or arena exists yet), each
 * sends 200 KB and reads them back echoed: every byte arrives, and every
 * connection is accelerated from its start to its end - none moves to TCP.
 * Over RDMA it found that a client connected whichever of its fresh queue
 * pairs heard the server's answer first to the server's new queue pair,
 * while the server had connected that one to the first client's queue pair:
 * two half-links that reached nobody, every connection on them moved to TCP
 * once the retries ran out (docs/rdma.md, link set-up). */
#include "common.h"
#include <pthread.h>

#define NTHR 16
#define LEN 200000

static struct sockaddr_storage ss;
static socklen_t len;
static pthread_barrier_t go;
static _Atomic int fds[NTHR], stage[NTHR]; /* what each thread has done */
static const char *role = "client";

/* Forty quiet seconds: say where each connection is before the deadline. */
static void *watchdog(void *arg)
{
	(void)arg;
	sleep(40);
	for (int i = 0; i < NTHR; i++) {
		struct shunt_info in = { .mode = 99 };
		socklen_t il = sizeof in;
		getsockopt(fds[i], SOL_SHUNT, SHUNT_INFO, &in, &il);
		fprintf(stderr, "%s %d: fd %d stage %d, tx %llu rx %llu, mode %u reason %u\n",
			role, i, fds[i],
			stage[i], (unsigned long long)in.tx, (unsigned long long)in.rx, in.mode, in.reason);
	}
	return NULL;
}

static void watch(void)
{
	pthread_t w;

	CHECK(pthread_create(&w, NULL, watchdog, NULL) == 0);
	pthread_detach(w);
}

static void *client(void *arg)
{
	uint32_t id = (uint32_t)(uintptr_t)arg;
	uint8_t *buf = malloc(LEN);
	int fd;

	CHECK(buf);

	pthread_barrier_wait(&go);
	fd = connect_to(&ss, len);
	fds[id] = fd;
	stage[id] = 1;
	expect_mode(fd);
	write_all(fd, &id, sizeof id);
	for (uint64_t i = 0; i < LEN; i++)
		buf[i] = pattern(i, id);
	write_all(fd, buf, LEN);
	stage[id] = 2;
	memset(buf, 0, LEN);
	read_all(fd, buf, LEN);
	stage[id] = 3;
	for (uint64_t i = 0; i < LEN; i++)
		CHECK(buf[i] == pattern(i, id));
	expect_mode(fd); /* still: no connection moved on the way */
	CHECK(read(fd, buf, 1) == 0);
	close(fd);
	stage[id] = 4;
	free(buf);
	return NULL;
}

/* Each server thread accepts one connection itself: sixteen accept()s
 * (and their handshakes) at once, as in a thread-per-connection server. */
static void *echo(void *arg)
{
	int fd = accept((int)(intptr_t)arg, NULL, NULL);
	uint8_t *buf = malloc(LEN);
	uint32_t id;

	CHECK(fd >= 0 && buf);
	read_all(fd, &id, sizeof id);
	CHECK(id < NTHR);
	fds[id] = fd;
	stage[id] = 1;
	read_all(fd, buf, LEN);
	stage[id] = 2;
	write_all(fd, buf, LEN);
	stage[id] = 3;
	expect_mode(fd);
	close(fd);
	stage[id] = 4;
	free(buf);
	return NULL;
}

int main(void)
{
	int l = listen_on("127.0.0.1", &ss, &len);
	pthread_t t[NTHR];

	deadline(120);
	pid_t p = test_fork();
	if (!p)
		role = "server";
	watch();
	if (!p) {
		for (int i = 0; i < NTHR; i++)
			CHECK(pthread_create(&t[i], NULL, echo, (void *)(intptr_t)l) == 0);
		for (int i = 0; i < NTHR; i++)
			pthread_join(t[i], NULL);
		_exit(0);
	}
	close(l);
	pthread_barrier_init(&go, NULL, NTHR);
	for (int i = 0; i < NTHR; i++)
		CHECK(pthread_create(&t[i], NULL, client, (void *)(uintptr_t)i) == 0);
	for (int i = 0; i < NTHR; i++)
		pthread_join(t[i], NULL);
	CHECK(wait_child(p) == 0);
	return 0;
}
