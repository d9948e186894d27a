/* SPDX-License-Identifier: MIT */
/*
 * ibv.h - rdma-core's libibverbs, opened when RDMA is first wanted.
 *
 * The shim is preloaded into every program, most of which never see an
 * RDMA device: linking libibverbs would load it (and its provider
 * plug-ins) everywhere.  So the library is dlopen()ed on first use and its
 * entry points are called through this table; the data-path calls
 * (ibv_post_send, ibv_poll_cq, ...) are inline functions of verbs.h that go
 * through the device context and need no table entry.
 */
#ifndef SHUNT_IBV_H
#define SHUNT_IBV_H
#include <infiniband/verbs.h>

struct ibv_api {
	struct ibv_device **(*get_device_list)(int *n);
	void (*free_device_list)(struct ibv_device **l);
	struct ibv_context *(*open_device)(struct ibv_device *d);
	int (*close_device)(struct ibv_context *c);
	const char *(*get_device_name)(struct ibv_device *d);
	int (*query_port)(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *a);
	int (*query_gid)(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid);
	int (*query_device)(struct ibv_context *c, struct ibv_device_attr *a);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *c);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *c);
	int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
	struct ibv_cq *(*create_cq)(struct ibv_context *c, int cqe, void *ctx,
				    struct ibv_comp_channel *ch, int vec);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned n);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *a);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	int (*get_async_event)(struct ibv_context *c, struct ibv_async_event *e);
	void (*ack_async_event)(struct ibv_async_event *e);
	const char *(*event_type_str)(enum ibv_event_type e);
};

extern struct ibv_api ibv;
/* 0 once the table is filled, -ENOENT if libibverbs is not installed. */
int ibv_load(void);
#endif
