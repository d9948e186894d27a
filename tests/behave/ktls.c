/* Description: kernel TLS (setsockopt TCP_ULP "tls", then SOL_TLS
 * TLS_TX/TLS_RX: what OpenSSL, nginx and HAProxy turn on after their
 * handshake) behaves as on TCP: what the program writes leaves as TLS
 * records the kernel encrypted, and records that came - even ones already
 * received but not yet read when the keys were set - are read decrypted.
 * Under shunt the rings would carry the bytes past the kernel's TLS (the
 * peer read plaintext, the program ciphertext): the connection moves to
 * TCP at the exact byte first, the peer resending onto the socket what
 * the ring held unread, and the control message that names a record's
 * type (TLS_SET_RECORD_TYPE: an alert, a handshake message) reaches the
 * kernel.  No TLS library: the records are TLS 1.2 AES-GCM-128 with a
 * fixed key, made by the kernel on a connection of this test and checked
 * by their framing; a kernel without TLS (ENOENT) skips the test. */
#include "common.h"
#include <linux/tls.h>

#define MSG "hello, kernel tls"             /* 17 bytes */
#define REC (5 + 8 + sizeof MSG - 1 + 16)  /* header, explicit nonce, data, tag */

static struct tls12_crypto_info_aes_gcm_128 keys(unsigned char k)
{
	struct tls12_crypto_info_aes_gcm_128 ci = { .info = { .version = TLS_1_2_VERSION,
							      .cipher_type = TLS_CIPHER_AES_GCM_128 } };

	memset(ci.key, k, sizeof ci.key);
	memset(ci.iv, k + 1, sizeof ci.iv);
	memset(ci.salt, k + 2, sizeof ci.salt);
	return ci; /* record sequence 0 */
}

/* TCP_ULP "tls" and the keys for one direction; a kernel without TLS:
 * the test is skipped (before any byte of it was sent). */
static void ktls_on(int fd, int dir, unsigned char k)
{
	struct tls12_crypto_info_aes_gcm_128 ci = keys(k);
	char ulp[16] = "";
	socklen_t l = sizeof ulp;

	if (getsockopt(fd, SOL_TCP, TCP_ULP, ulp, &l) || strcmp(ulp, "tls")) {
		if (setsockopt(fd, SOL_TCP, TCP_ULP, "tls", sizeof "tls") && errno == ENOENT) {
			/* as a kernel without it says: nothing changed - under
			 * shunt the connection stays accelerated */
			expect_mode(fd);
			printf("skip: this kernel has no TLS (TCP_ULP tls: ENOENT)\n");
			exit(77);
		}
		l = sizeof ulp;
		CHECK(getsockopt(fd, SOL_TCP, TCP_ULP, ulp, &l) == 0 && !strcmp(ulp, "tls"));
	}
	CHECK(setsockopt(fd, SOL_TLS, dir, &ci, sizeof ci) == 0);
	expect_plain_now(fd, "kernel TLS");
}

/* A TLS 1.2 record of the given type (23 application data, 21 an alert)
 * carrying MSG, not as plaintext: what the kernel's TLS_TX makes of it. */
static void expect_record(const unsigned char *r, size_t n, unsigned type)
{
	CHECK(n == REC);
	if (r[0] != type || r[1] != 3 || r[2] != 3 || (size_t)(r[3] << 8 | r[4]) != REC - 5) {
		fprintf(stderr, "not a TLS record of type %u: %02x %02x %02x %02x %02x (plaintext '%.*s'?)\n",
			type, r[0], r[1], r[2], r[3], r[4], (int)n, (const char *)r);
		exit(1);
	}
	CHECK(!memmem(r, n, MSG, sizeof MSG - 1));
}

static void *accept_one(void *l)
{
	return (void *)(long)accept(*(int *)l, NULL, NULL);
}

/* One record MSG, as the kernel's TLS_TX with key k makes it - on a
 * connection of this process (under shunt: accelerated until TCP_ULP;
 * accepted by a thread: between hosts the connect waits for the accept). */
static void make_record(unsigned char *rec, unsigned char k)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	int l, c, a;
	pthread_t t;
	void *r;

	if (split_role()) { /* the test's listener is across hosts: this one here */
		struct sockaddr_in *in = (void *)&ss;
		memset(&ss, 0, sizeof ss);
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		CHECK((l = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
		CHECK(bind(l, (void *)in, sizeof *in) == 0 && listen(l, 1) == 0);
		CHECK(getsockname(l, (void *)&ss, &len) == 0);
	} else {
		l = listen_on("127.0.0.1", &ss, &len);
	}
	CHECK(pthread_create(&t, NULL, accept_one, &l) == 0);
	c = connect_to(&ss, len);
	CHECK(pthread_join(t, &r) == 0 && (a = (int)(long)r) >= 0);
	if (!split_role())
		expect_mode(c);
	write_all(c, "x", 1); /* accelerated bytes first: the move comes after them */
	read_all(a, rec, 1);
	ktls_on(c, TLS_TX, k);
	write_all(c, MSG, sizeof MSG - 1);
	read_all(a, rec, REC);
	expect_record(rec, REC, 23);
	close(c);
	close(a);
	close(l);
}

/* The server: echoes the client's record back as it came; then reads the
 * client's kernel-made records (application data, then an alert) raw. */
static void server(int l)
{
	unsigned char rec[REC];
	int c = accept(l, NULL, NULL);

	CHECK(c >= 0);
	read_all(c, rec, REC);
	write_all(c, rec, REC);
	read_all(c, rec, REC);
	expect_record(rec, REC, 23);
	read_all(c, rec, REC);
	expect_record(rec, REC, 21);
	close(c);
	_exit(0);
}

int main(void)
{
	struct sockaddr_storage ss;
	socklen_t len;
	unsigned char rec[REC], ctl[CMSG_SPACE(1)];
	char got[sizeof MSG];
	pid_t p;
	int fd;

	setvbuf(stdout, NULL, _IONBF, 0);
	deadline(60); /* (serve_in_child arms it again) */
	make_record(rec, 7);
	p = serve_in_child(server, &ss, &len);
	fd = connect_to(&ss, len);
	expect_mode(fd);
	/* our record comes back and waits unread (under shunt: in our
	 * ring) while the keys are set: the kernel must decrypt it */
	write_all(fd, rec, REC);
	CHECK(poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 10000) == 1);
	ktls_on(fd, TLS_RX, 7);
	read_all(fd, got, sizeof MSG - 1);
	CHECK(!memcmp(got, MSG, sizeof MSG - 1));
	/* what we write leaves encrypted; a record type set by a control
	 * message (21: an alert) is the kernel's to put in the record */
	ktls_on(fd, TLS_TX, 9);
	write_all(fd, MSG, sizeof MSG - 1);
	{
		struct iovec iov = { MSG, sizeof MSG - 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_TLS;
		h->cmsg_type = TLS_SET_RECORD_TYPE;
		h->cmsg_len = CMSG_LEN(1);
		*CMSG_DATA(h) = 21;
		CHECK(sendmsg(fd, &m, 0) == (ssize_t)(sizeof MSG - 1));
	}
	CHECK(wait_child(p) == 0);
	/* the server's close: the end of the stream, through kernel TLS */
	CHECK(read(fd, got, sizeof got) == 0);
	close(fd);
	return 0;
}
