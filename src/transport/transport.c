/* SPDX-License-Identifier: MIT */
/*
 * transport.c - the transports this library was built with (transport.h).
 * RDMA is there when libibverbs' headers were (the Makefile defines
 * SHUNT_HAVE_RDMA and builds src/transport/rdma); nothing stands in for it
 * otherwise.
 */
#include <stddef.h>
#include "../base/base.h"
#include "transport.h"

#ifdef SHUNT_HAVE_RDMA
extern const struct transport rdma_transport;
extern const struct remote_setup rdma_setup;
#endif

const struct transport *const shunt_transports[] = {
	&shm_transport,
#ifdef SHUNT_HAVE_RDMA
	&rdma_transport,
#endif
	NULL,
};

#ifdef SHUNT_HAVE_RDMA
const struct remote_setup *const shunt_remote = &rdma_setup;
#else
const struct remote_setup *const shunt_remote = NULL;
#endif

void transports_share_prepare(const char *why, int reason)
{
	for (const struct transport *const *t = shunt_transports; *t; t++)
		if ((*t)->share_prepare)
			(*t)->share_prepare(why, reason);
}

SHUNT_CHILD_PATH void transports_exit_flush(void)
{
	for (const struct transport *const *t = shunt_transports; *t; t++)
		if ((*t)->exit_flush)
			(*t)->exit_flush();
}

SHUNT_CHILD_PATH void transports_atfork_child(void)
{
	for (const struct transport *const *t = shunt_transports; *t; t++)
		if ((*t)->atfork_child)
			(*t)->atfork_child();
}

void transports_creds_changed(void)
{
	for (const struct transport *const *t = shunt_transports; *t; t++)
		if ((*t)->creds_changed)
			(*t)->creds_changed();
}

int transports_drop_unused(void)
{
	int n = 0;

	for (const struct transport *const *t = shunt_transports; *t; t++)
		if ((*t)->drop_unused)
			n += (*t)->drop_unused();
	return n;
}
