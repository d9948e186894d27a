/* SPDX-License-Identifier: MIT */
/* ibv.c - fill the libibverbs table on first use (see ibv.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include "ibv.h"
#include "../../base/lock.h"

struct ibv_api ibv;
static int loaded; /* 0 not tried, 1 ok, -errno failed */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static const struct { const char *name; size_t off; } syms[] = {
#define S(f) { "ibv_" #f, offsetof(struct ibv_api, f) }
	S(get_device_list), S(free_device_list), S(open_device), S(close_device),
	S(get_device_name), S(query_port), S(query_gid), S(query_device), S(alloc_pd),
	S(dealloc_pd), S(create_comp_channel), S(destroy_comp_channel),
	S(create_cq), S(destroy_cq), S(get_cq_event),
	S(ack_cq_events), S(create_qp), S(modify_qp), S(destroy_qp), S(reg_mr), S(dereg_mr),
	S(get_async_event), S(ack_async_event), S(event_type_str),
#undef S
};

int ibv_load(void)
{
	void *h;

	shunt_mutex_lock(&lock);
	if (loaded) {
		shunt_mutex_unlock(&lock);
		return loaded > 0 ? 0 : loaded;
	}
	loaded = -ENOENT;
	h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h) {
		loaded = 1;
		for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
			void *f = dlsym(h, syms[i].name);
			if (!f) {
				loaded = -ENOENT;
				break;
			}
			*(void **)((char *)&ibv + syms[i].off) = f;
		}
	}
	shunt_mutex_unlock(&lock);
	return loaded > 0 ? 0 : loaded;
}
