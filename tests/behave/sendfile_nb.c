/* Description: sendfile() into a non-blocking socket whose peer reads
 * slowly, as Ruby's IO.copy_stream(file, socket) does: each call sends
 * what the socket takes and says EAGAIN when it takes nothing; the loop
 * waits in poll for room.  Every byte arrives in order, and the file's
 * position is exactly what was sent after each call (without an offset),
 * or stays where it was (with one).  Before, a call whose first chunk
 * met a full ring said EAGAIN with the file's position 64 KiB on: Ruby's
 * copy lost those bytes each time (found with a ruby server under shunt:
 * a 30 MB file arrived 64 KiB short, bytes 262,144-327,679 missing). */
#include "common.h"
#include <sys/sendfile.h>

#define FILE_BYTES (3u << 20)
#define SEED 23

/* the file twice: once through its position, once through an offset */
static void server(int l)
{
	int c = accept(l, NULL, NULL);
	uint8_t *b = malloc(FILE_BYTES);
	size_t got = 0;

	CHECK(c >= 0 && b);
	expect_mode(c);
	for (int round = 0; round < 2; round++) {
		for (got = 0; got < FILE_BYTES;) {
			ssize_t n = read(c, b + got, FILE_BYTES - got < 16384 ? FILE_BYTES - got : 16384);
			CHECK(n > 0);
			got += (size_t)n;
			if (got < FILE_BYTES / 2)
				usleep(200); /* slow at first: the sender meets a full ring */
		}
		for (size_t i = 0; i < FILE_BYTES; i++)
			if (b[i] != pattern(i, SEED)) {
				fprintf(stderr, "round %d: byte %zu differs\n", round, i);
				_exit(1);
			}
	}
	write_all(c, "k", 1);
	_exit(0);
}

/* Sends the file from its position (off NULL) or from *off, each call
 * checked against the kernel's contract; how many calls said EAGAIN. */
static int send_file(int fd, int tf, off_t *off)
{
	size_t sent = 0;
	int again = 0;

	while (sent < FILE_BYTES) {
		ssize_t n = sendfile(fd, tf, off, FILE_BYTES - sent);
		if (n < 0) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			CHECK(errno == EAGAIN);
			again++;
			CHECK(poll(&p, 1, 10000) == 1);
			n = 0;
		}
		sent += (size_t)n;
		if (off)
			CHECK(*off == (off_t)sent && lseek(tf, 0, SEEK_CUR) == 0);
		else
			CHECK(lseek(tf, 0, SEEK_CUR) == (off_t)sent);
	}
	return again;
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	pid_t p = serve_in_child(server, &ss, &len);
	char path[] = "/tmp/shunt-sendfile-nb-XXXXXX", k;
	int fd = connect_to(&ss, len), tf = mkstemp(path), again;
	off_t off = 0;

	CHECK(tf >= 0);
	unlink(path);
	write_pattern(tf, FILE_BYTES, SEED);
	CHECK(lseek(tf, 0, SEEK_SET) == 0);
	expect_mode(fd);
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	again = send_file(fd, tf, NULL);
	CHECK(lseek(tf, 0, SEEK_SET) == 0);
	again += send_file(fd, tf, &off);
	CHECK(fcntl(fd, F_SETFL, 0) == 0);
	read_all(fd, &k, 1);
	CHECK(k == 'k');
	printf("6 MiB sent, %d calls said EAGAIN\n", again);
	CHECK(wait_child(p) == 0);
	return 0;
}
