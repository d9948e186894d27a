/* Description: the byte counts `shunt ss` shows (and SHUNT_INFO returns)
 * are what each program sent and received - also the first bytes a client
 * writes right after connect(), which go ahead of the server's answer in
 * the offer's slot (early.c), and bytes written by writev() and sendmsg().
 * Before, those first bytes were never counted: a client that sent its
 * request in one write showed TX 0 (stunnel's, python's).  Plain TCP: the
 * stream alone is checked. */
#include "common.h"
#include <sys/uio.h>

static void counts(int fd, uint64_t tx, uint64_t rx, const char *who)
{
	struct shunt_info info;
	socklen_t l = sizeof info;

	if (!getenv("SHUNT_EXPECT"))
		return;
	CHECK(getsockopt(fd, SOL_SHUNT, SHUNT_INFO, &info, &l) == 0);
	if (info.tx != tx || info.rx != rx)
		fprintf(stderr, "%s: tx %llu rx %llu, expected %llu and %llu\n", who,
			(unsigned long long)info.tx, (unsigned long long)info.rx, (unsigned long long)tx,
			(unsigned long long)rx);
	CHECK(info.tx == tx && info.rx == rx);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char buf[4096];
	int l = listen_on("127.0.0.1", &ss, &len);

	deadline(30);
	memset(buf, 'r', sizeof buf);
	pid_t p = fork();
	if (!p) {
		int c = accept(l, NULL, NULL);
		CHECK(c >= 0);
		expect_mode(c);
		read_all(c, buf, 1000 + 300);
		write_all(c, buf, 500);
		CHECK(read(c, buf, 1) == 0);
		counts(c, 500, 1300, "server");
		close(c);
		_exit(0);
	}
	close(l);
	int fd = connect_to(&ss, len);
	write_all(fd, buf, 1000); /* at once: in the slot, ahead of the answer */
	struct iovec iov[2] = { { buf, 100 }, { buf, 200 } };
	CHECK(writev(fd, iov, 2) == 300);
	read_all(fd, buf, 500);
	expect_mode(fd);
	counts(fd, 1300, 500, "client");
	CHECK(shutdown(fd, SHUT_WR) == 0);
	int st;
	CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fd);
	return 0;
}
