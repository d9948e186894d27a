/* Description: a connection handed to a program that will run without
 * shunt keeps every byte.  An inetd-style server puts the connection on
 * 0 and 1 and execs the service: a statically linked one (no loader reads
 * LD_PRELOAD: Go's programs, busybox-static) or a set-user-ID one owned by
 * another user (the loader ignores LD_PRELOAD's paths in secure-execution
 * mode).  Such a program reads the bare kernel socket; shunt handed the
 * connection over as for any exec, and the service read nothing while the
 * client's bytes sat in the rings.  Now the connection moves to TCP at
 * the exact byte first (reason fork-exec), and the echo of 300 KiB each
 * way comes back whole. */
#include "common.h"
#include <libgen.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#define BULK (300 * 1024)
#define CHUNK 16384

/* A set-user-ID copy of cat owned by nobody, where that can be made (root,
 * a file system that honours the bit); else NULL. */
static const char *suid_cat(char *dir)
{
	static char path[256];
	struct statvfs v;
	char cmd[1024];

	if (geteuid() || !mkdtemp(dir) || chmod(dir, 0755) || statvfs(dir, &v) || (v.f_flag & ST_NOSUID))
		return NULL;
	snprintf(path, sizeof path, "%s/cat", dir);
	snprintf(cmd, sizeof cmd, "cp /bin/cat %s && chown 65534 %s && chmod 4755 %s", path, path, path);
	return system(cmd) ? NULL : path;
}

/* The service: the connection it accepts on 0 and 1, then the program
 * (inetd's nowait child, without the fork after the accept). */
static void serve(int l, const char *prog)
{
	int c = accept(l, NULL, NULL);

	CHECK(c >= 0);
	CHECK(dup2(c, 0) == 0 && dup2(c, 1) == 1);
	close(c);
	execl(prog, prog, (char *)NULL);
	_exit(127);
}

/* 300 KiB through the echo, a chunk at a time, then the end. */
static void echo_through(const struct sockaddr_storage *ss, socklen_t len)
{
	static char out[CHUNK], in[CHUNK];
	int fd = connect_to(ss, len);
	struct shunt_info i;

	expect_mode_peer_forks(fd);
	for (uint64_t pos = 0; pos < BULK; pos += CHUNK) {
		for (int k = 0; k < CHUNK; k++)
			out[k] = (char)pattern(pos + (uint64_t)k, 3);
		write_all(fd, out, CHUNK);
		read_all(fd, in, CHUNK);
		if (memcmp(in, out, CHUNK)) {
			fprintf(stderr, "echo differs in [%llu, +%d)\n", (unsigned long long)pos, CHUNK);
			exit(1);
		}
	}
	CHECK(shutdown(fd, SHUT_WR) == 0);
	CHECK(read(fd, in, 1) == 0);
	if (getenv("SHUNT_EXPECT")) {
		i = sock_info(fd);
		if (i.mode != 0) {
			fprintf(stderr, "mode %u after the exec, wanted plain TCP (moved)\n", i.mode);
			exit(1);
		}
	}
	close(fd);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = listen_on("127.0.0.1", &ss, &len);
	char self[512], stat_cat[600], dir[] = "/tmp/shunt-exec-XXXXXX";
	const char *progs[2];
	int n = 0;
	pid_t p;

	(void)argc;
	deadline(60);
	snprintf(self, sizeof self, "%s", argv[0]);
	snprintf(stat_cat, sizeof stat_cat, "%s/../tools/static_cat", dirname(self));
	CHECK(access(stat_cat, X_OK) == 0);
	progs[n++] = stat_cat;
	if ((progs[n] = suid_cat(dir)))
		n++;
	else
		fprintf(stderr, "exec_foreign: no set-user-ID program here (not root, or nosuid): static only\n");
	p = test_fork();
	if (!p) {
		/* a service process per program, forked before its accept */
		for (int i = 0; i < n; i++) {
			pid_t q = fork();
			int st;
			CHECK(q >= 0);
			if (!q)
				serve(l, progs[i]);
			CHECK(waitpid(q, &st, 0) == q && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
		_exit(0);
	}
	close(l);
	for (int i = 0; i < n; i++)
		echo_through(&ss, len);
	CHECK(wait_child(p) == 0);
	if (n > 1) {
		unlink(progs[1]);
		rmdir(dir);
	}
	return 0;
}
