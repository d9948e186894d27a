/* uring.h - the behaviour programs' io_uring step (liburing; after
 * common.h). */
#ifndef SHUNT_TEST_URING_H
#define SHUNT_TEST_URING_H
#include <liburing.h>

/* The operation prepared in the ring's next entry, submitted and waited
 * for: its result. */
static inline int uring_one(struct io_uring *r)
{
	struct io_uring_cqe *cqe;
	int res;

	CHECK(io_uring_submit(r) == 1);
	CHECK(io_uring_wait_cqe(r, &cqe) == 0);
	res = cqe->res;
	io_uring_cqe_seen(r, cqe);
	return res;
}

/* A send or receive of n bytes at buf through the ring: its result. */
static inline int uring_io(struct io_uring *r, int fd, void *buf, size_t n, int send)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(r);

	CHECK(sqe);
	if (send)
		io_uring_prep_send(sqe, fd, buf, n, 0);
	else
		io_uring_prep_recv(sqe, fd, buf, n, 0);
	return uring_one(r);
}
#endif
