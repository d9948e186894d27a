/* Description: many short connections, one after another from THREADS
 * threads (connect, one byte each way, close), for bench/churn.sh (issue
 * #13, item 9: RSS and the rendezvous directory stay flat over 100,000
 * connections).  After each tenth of TOTAL it prints one line:
 *   "conns=N client_rss_kb=K server_rss_kb=S client_fds=F server_fds=G dir=D"
 * (D: entries in $SHUNT_DIR, -1 without it)
 *   churn TOTAL THREADS */
#include "../behave/common.h" /* first: it sets _GNU_SOURCE */
#include <dirent.h>
#include <pthread.h>

static struct sockaddr_storage ss;
static socklen_t len;
static long per_thread;
static pthread_barrier_t step;

static long status_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, field, strlen(field)))
			sscanf(line + strlen(field), "%ld", &v);
	fclose(f);
	return v;
}

static int entries(const char *path)
{
	int n = 0;
	DIR *d;

	if (!path || !(d = opendir(path)))
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 2;
}

static void *client(void *arg)
{
	(void)arg;
	for (int tenth = 0; tenth < 10; tenth++) {
		for (long i = 0; i < per_thread / 10; i++) {
			char c = 'x';
			int fd = connect_to(&ss, len);
			CHECK(send(fd, &c, 1, 0) == 1 && recv(fd, &c, 1, MSG_WAITALL) == 1);
			close(fd);
		}
		pthread_barrier_wait(&step); /* main reports */
		pthread_barrier_wait(&step);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long total = argc == 3 ? atol(argv[1]) : 0;
	int threads = argc == 3 ? atoi(argv[2]) : 0, l;
	pthread_t t[64];
	pid_t pid;

	if (total <= 0 || threads <= 0 || threads > 64) {
		fprintf(stderr, "usage: churn TOTAL THREADS\n");
		return 2;
	}
	per_thread = total / threads;
	l = listen_on("127.0.0.1", &ss, &len);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < threads; i++)
			CHECK(pthread_create(&t[i], NULL, echo_one_byte, &l) == 0);
		pause();
		_exit(0);
	}
	pthread_barrier_init(&step, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++)
		CHECK(pthread_create(&t[i], NULL, client, NULL) == 0);
	for (int tenth = 1; tenth <= 10; tenth++) {
		pthread_barrier_wait(&step);
		usleep(20000); /* the server closes its last ones */
		char me[64], it[64];
		snprintf(me, sizeof me, "/proc/%d/fd", (int)getpid());
		snprintf(it, sizeof it, "/proc/%d/fd", (int)pid);
		printf("conns=%ld client_rss_kb=%ld server_rss_kb=%ld client_fds=%d server_fds=%d dir=%d\n",
		       per_thread / 10 * tenth * threads, status_kb(getpid(), "VmRSS:"),
		       status_kb(pid, "VmRSS:"), entries(me), entries(it), entries(getenv("SHUNT_DIR")));
		fflush(stdout);
		pthread_barrier_wait(&step);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}
