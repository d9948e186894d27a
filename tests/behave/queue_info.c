/* Description: what a program learns about a connection's queues matches
 * TCP: recv(MSG_PEEK|MSG_WAITALL) waits for the whole count, SO_RCVLOWAT
 * keeps poll() quiet and a blocking recv() waiting until that many bytes
 * are there, TCP_INFO counts the bytes sent, acknowledged and received,
 * and SIOCOUTQ/SIOCOUTQNSD come to 0 once the peer has everything (under
 * shunt, SIOCOUTQ is exactly the bytes the peer has not read yet).
 * (Issue #13, item 3: after acceleration the kernel described an idle
 * connection, and a peek returned what was there.) */
#include "common.h"
#include <linux/sockios.h>
#include <sys/ioctl.h>

#define N 5000
/* struct tcp_info's byte counters (<linux/tcp.h>: glibc's copy stops
 * before them, and the two headers do not mix); the kernel only appends
 * to this structure, so the offsets are its ABI */
#define TI_BYTES_ACKED 120
#define TI_BYTES_RECEIVED 128

static uint64_t tcp_info_u64(int fd, size_t off)
{
	uint8_t ti[256];
	socklen_t tl = sizeof ti;
	uint64_t v;

	CHECK(getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &tl) == 0 && tl >= off + 8);
	memcpy(&v, ti + off, 8);
	return v;
}

static int outq(int fd, unsigned long req)
{
	int v = -1;
	CHECK(ioctl(fd, req, &v) == 0);
	return v;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	static char buf[N];
	struct chan ch;
	char cmd;

	deadline(30);
	chan_open(&ch);
	pid_t p = test_fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		memset(buf, 'a', sizeof buf);
		/* 1: half, then the other half later */
		write_all(c, buf, 500);
		usleep(200000);
		write_all(c, buf, 500);
		/* 2: 500 bytes, then 600 more when told */
		CHECK(chan_recv(&ch, &cmd) && cmd == '2');
		write_all(c, buf, 500);
		CHECK(chan_recv(&ch, &cmd) && cmd == '3');
		write_all(c, buf, 600);
		/* 3: read N bytes only when told */
		CHECK(chan_recv(&ch, &cmd) && cmd == '4');
		read_all(c, buf, N);
		CHECK(chan_recv(&ch, &cmd) && cmd == '5');
		_exit(0);
	}
	int fd = connect_to(&ss, len);
	expect_mode(fd);

	double t = now_s();
	CHECK(recv(fd, buf, 1000, MSG_PEEK | MSG_WAITALL) == 1000);
	CHECK(now_s() - t > 0.15);
	read_all(fd, buf, 1000);

	int lowat = 1000;
	CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat) == 0);
	chan_send(&ch, '2');
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	CHECK(poll(&pf, 1, 300) == 0); /* 500 < 1000: not readable yet */
	chan_send(&ch, '3');
	CHECK(poll(&pf, 1, 5000) == 1 && (pf.revents & POLLIN));
	read_all(fd, buf, 1100);
	lowat = 1;
	CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat) == 0);

	CHECK(tcp_info_u64(fd, TI_BYTES_RECEIVED) >= 2100);

	memset(buf, 'b', sizeof buf);
	write_all(fd, buf, N);
	if (getenv("SHUNT_EXPECT") && !strcmp(getenv("SHUNT_EXPECT"), "shm"))
		CHECK(outq(fd, SIOCOUTQ) == N); /* not read by the peer yet */
	chan_send(&ch, '4');
	for (int i = 0; i < 500 && (outq(fd, SIOCOUTQ) || outq(fd, SIOCOUTQNSD)); i++)
		usleep(10000);
	CHECK(outq(fd, SIOCOUTQ) == 0 && outq(fd, SIOCOUTQNSD) == 0);
	CHECK(tcp_info_u64(fd, TI_BYTES_ACKED) >= N);
	chan_send(&ch, '5');
	CHECK(wait_child(p) == 0);
	return 0;
}
