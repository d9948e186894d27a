/* Description: a fork-per-connection server whose parent closes its copy
 * at once, with the request still unread, hands the connection over
 * intact: the child reads the request, answers, closes, and the client
 * reads the answer and a clean EOF - no reset (closing with unread data
 * resets only when it is the connection's last close), 20 times in a row. */
#include "common.h"
#include <sys/ioctl.h>

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char buf[64];

	deadline(60);
	pid_t srv = fork();
	if (!srv) {
		deadline(60); /* an alarm is not inherited: a failed client must not leave us */
		for (int i = 0; i < 20; i++) {
			int c = accept(l, NULL, NULL), n = 0;
			CHECK(c >= 0);
			while (ioctl(c, FIONREAD, &n) == 0 && n < 5)
				usleep(1000); /* the request is there, unread */
			pid_t k = fork();
			if (!k) {
				read_all(c, buf, 5);
				CHECK(!memcmp(buf, "hello", 5));
				write_all(c, "world", 5);
				close(c);
				_exit(0);
			}
			CHECK(k > 0);
			close(c); /* at once: the child has it */
			CHECK(waitpid(k, NULL, 0) == k);
		}
		_exit(0);
	}
	for (int i = 0; i < 20; i++) {
		int fd = connect_to(&ss, len);
		expect_mode_peer_forks(fd);
		write_all(fd, "hello", 5);
		read_all(fd, buf, 5);
		CHECK(!memcmp(buf, "world", 5));
		CHECK(read(fd, buf, sizeof buf) == 0); /* EOF, not ECONNRESET */
		close(fd);
	}
	CHECK(wait_child(srv) == 0);
	return 0;
}
