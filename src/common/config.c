/* SPDX-License-Identifier: MIT */
/* config.c - parse SHUNT_* variables; a bad value is reported, never fatal. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "config.h"

static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* Strict decimal integer in [lo, hi]. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int shunt_config_bool(const char *v)
{
	static const char *const yes[] = { "1", "yes", "true", "on" }, *const no[] = { "0", "no", "false", "off" };

	for (unsigned i = 0; v && i < sizeof yes / sizeof yes[0]; i++) {
		if (!strcasecmp(v, yes[i]))
			return 1;
		if (!strcasecmp(v, no[i]))
			return 0;
	}
	return -1;
}

static uint32_t round_pow2(uint32_t v)
{
	uint32_t p = 4096;

	while (p < v && p < (1u << 30))
		p <<= 1;
	return p;
}

static int parse_ports(struct shunt_config *cfg, const char *s)
{
	char buf[256], *save = NULL, *tok;
	long v;

	if (strlen(s) >= sizeof buf)
		return -EINVAL;
	strcpy(buf, s);
	cfg->nports = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (cfg->nports == (int)(sizeof cfg->ports / sizeof cfg->ports[0]))
			return -EINVAL;
		if (parse_long(tok, 1, 65535, &v))
			return -EINVAL;
		cfg->ports[cfg->nports++] = (uint16_t)v;
	}
	return cfg->nports ? 0 : -EINVAL;
}

static void set_defaults(struct shunt_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	snprintf(cfg->dir, sizeof cfg->dir, "/tmp/shunt-%u", (unsigned)getuid());
	cfg->ring_size = 256 * 1024;
	cfg->spin_ns = 20 * 1000;
	cfg->accept_wait_ms = 200;
	cfg->local = 1;
	cfg->rdma_ack_timeout = 14;
	cfg->busy_short = 1;
	cfg->busy_runnable = 40;
}

int shunt_config_parse(struct shunt_config *cfg, char *const *envp, const char **bad)
{
	const char *v;
	long n;
	int err = 0;

	set_defaults(cfg);
#define BAD(name) do { err = -EINVAL; *bad = name; } while (0)
	if ((v = env_get(envp, "SHUNT_DIR"))) {
		if (v[0] != '/' || strlen(v) >= sizeof cfg->dir)
			BAD("SHUNT_DIR");
		else
			strcpy(cfg->dir, v), cfg->dir_explicit = 1;
	}
	if ((v = env_get(envp, "SHUNT_RING_KB"))) {
		if (parse_long(v, 4, 1 << 20, &n))
			BAD("SHUNT_RING_KB");
		else
			cfg->ring_size = round_pow2((uint32_t)n * 1024u);
	}
	if ((v = env_get(envp, "SHUNT_SPIN_US"))) {
		if (parse_long(v, -1, 10 * 1000 * 1000, &n))
			BAD("SHUNT_SPIN_US");
		else
			cfg->spin_ns = n < 0 ? -1 : n * 1000;
	}
	if ((v = env_get(envp, "SHUNT_ACCEPT_WAIT_MS"))) {
		if (parse_long(v, 0, 60000, &n))
			BAD("SHUNT_ACCEPT_WAIT_MS");
		else
			cfg->accept_wait_ms = (int)n;
	}
	if ((v = env_get(envp, "SHUNT_DISABLE"))) {
		/* Whoever sets it means "off": an unknown value disables too. */
		int b = shunt_config_bool(v);
		cfg->disabled = b != 0;
		if (b < 0)
			BAD("SHUNT_DISABLE");
	}
	if ((v = env_get(envp, "SHUNT_LOCAL"))) {
		if (strcmp(v, "0") && strcmp(v, "1"))
			BAD("SHUNT_LOCAL");
		else
			cfg->local = v[0] == '1';
	}
	if ((v = env_get(envp, "SHUNT_TRANSPORT"))) {
		if (!strcmp(v, "auto"))
			cfg->transport = 0;
		else if (!strcmp(v, "shm"))
			cfg->transport = 1;
		else if (!strcmp(v, "rdma"))
			cfg->transport = 2, cfg->local = 0;
		else
			BAD("SHUNT_TRANSPORT");
	}
	if ((v = env_get(envp, "SHUNT_RDMA_FORK"))) {
		if (!strcmp(v, "move"))
			cfg->rdma_fork_keep = 0;
		else if (!strcmp(v, "keep"))
			cfg->rdma_fork_keep = 1;
		else
			BAD("SHUNT_RDMA_FORK");
	}
	if ((v = env_get(envp, "SHUNT_RDMA_ACK_TIMEOUT"))) {
		if (parse_long(v, 1, 31, &n)) /* 0 would be "wait for ever" */
			BAD("SHUNT_RDMA_ACK_TIMEOUT");
		else
			cfg->rdma_ack_timeout = (int)n;
	}
	if ((v = env_get(envp, "SHUNT_LOG"))) {
		int b = shunt_config_bool(v);
		cfg->log = b == 1;
		if (b < 0)
			BAD("SHUNT_LOG");
	}
	if ((v = env_get(envp, "SHUNT_BUSY_SHORT"))) {
		int b = shunt_config_bool(v);
		if (b < 0)
			BAD("SHUNT_BUSY_SHORT");
		else
			cfg->busy_short = b;
	}
	if ((v = env_get(envp, "SHUNT_BUSY_RUNNABLE"))) {
		if (parse_long(v, 1, 100000, &n))
			BAD("SHUNT_BUSY_RUNNABLE");
		else
			cfg->busy_runnable = (int)n;
	}
	if ((v = env_get(envp, "SHUNT_PORTS")) && parse_ports(cfg, v)) {
		cfg->nports = 0;
		BAD("SHUNT_PORTS");
	}
#undef BAD
	return err;
}

int shunt_config_port_allowed(const struct shunt_config *cfg, uint16_t port)
{
	if (!cfg->nports)
		return 1;
	for (int i = 0; i < cfg->nports; i++)
		if (cfg->ports[i] == port)
			return 1;
	return 0;
}
