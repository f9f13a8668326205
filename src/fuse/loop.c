/*
 * fuse: the request loop.  One thread at a time holds the "reader role":
 * it reads a request from /dev/fuse and handles it itself, then reads the
 * next.  Only when the thread is about to wait - for a lock another
 * thread holds, for a commit's device writes (the library's block hook),
 * or for the disk in a READ - does it pass the role to a standby thread
 * (started on demand, at most max_threads in all) and go on with its
 * request; once done it stands by.  With every thread busy the role waits
 * for the first one to finish.
 *
 * UBTRFS_REQUEST_STATS=1 in the daemon's environment counts, per request
 * type, the requests and the CPU time the handling thread spent on them
 * (its own clock: time the thread waits or is preempted is not counted;
 * the reply's write is), and logs the table when the loop ends.  It is how
 * docs/PERFORMANCE.md measures what a change does to one kind of request:
 * steadier than wall time on a shared machine.  Each request then costs
 * two more clock reads.
 *
 * Why not libfuse's multi-threaded loop: there every thread reads
 * /dev/fuse, the kernel wakes the readers in turn, and on a machine where
 * the calling process and the daemon share a CPU each request went to
 * another thread: creating 20,000 files or removing them ran 15-25%
 * slower than with one thread.  Why not libfuse's single-threaded loop:
 * an fsync (a commit) or a cold read would hold up every other request.
 */
#include "fuse_loop.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct worker {
	struct loop *l;
	pthread_t tid;
	bool reader;		/* holds the role (read by its own thread only) */
	struct fuse_buf buf;
	struct worker *next;
};

struct loop {
	struct fuse_session *se;
	pthread_mutex_t mu;
	pthread_cond_t cv;	/* standby threads wait here for the role */
	bool role_free;		/* no thread holds the role */
	bool exit;
	unsigned nthreads, nstandby, max_threads;
	int error;
	struct worker *workers;
	sem_t finish;		/* posted when a worker sees the session end */
};

static _Thread_local struct worker *self;

/* UBTRFS_REQUEST_STATS: per opcode (below 64), requests and thread CPU ns. */
#define STAT_OPS 64
static bool stats_on;
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t stats_n[STAT_OPS], stats_ns[STAT_OPS];

static uint64_t thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void process(struct loop *l, struct worker *w)
{
	if (!stats_on) {
		fuse_session_process_buf(l->se, &w->buf);
		return;
	}
	uint32_t op = UINT32_MAX;
	if (w->buf.size >= 8 && !(w->buf.flags & FUSE_BUF_IS_FD))
		memcpy(&op, (const uint8_t *)w->buf.mem + 4, sizeof(op));	/* fuse_in_header.opcode */
	uint64_t t0 = thread_ns();
	fuse_session_process_buf(l->se, &w->buf);
	uint64_t dt = thread_ns() - t0;
	if (op < STAT_OPS) {
		pthread_mutex_lock(&stats_mu);
		stats_n[op]++;
		stats_ns[op] += dt;
		pthread_mutex_unlock(&stats_mu);
	}
}

static void stats_log(void)
{
	if (!stats_on)
		return;
	fprintf(stderr, "ubtrfs: request stats: opcode, requests, thread CPU per request (us), "
		"total (ms)\n");
	for (int op = 0; op < STAT_OPS; op++)
		if (stats_n[op])
			fprintf(stderr, "ubtrfs: request stats: %2d %9llu %8.2f %9.1f\n", op,
				(unsigned long long)stats_n[op],
				(double)stats_ns[op] / (double)stats_n[op] / 1e3,
				(double)stats_ns[op] / 1e6);
}

static void *work(void *arg);

/* With l->mu held.  Signals stay blocked in workers: the main thread gets
 * them (libfuse's handlers end the session there). */
static int start_worker(struct loop *l)
{
	struct worker *w = calloc(1, sizeof(*w));
	sigset_t all, old;

	if (!w)
		return -ENOMEM;
	w->l = l;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int ret = pthread_create(&w->tid, NULL, work, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		free(w);
		return -ret;
	}
	w->next = l->workers;
	l->workers = w;
	l->nthreads++;
	return 0;
}

void ubtrfs_fuse_loop_yield(void)
{
	struct worker *w = self;

	if (!w || !w->reader)
		return;
	struct loop *l = w->l;
	pthread_mutex_lock(&l->mu);
	/* The role becomes free in any case: a standby thread takes it now,
	 * a new one once started, or else the first thread to finish its
	 * request (this one included).  No new thread once the loop ends. */
	w->reader = false;
	l->role_free = true;
	if (l->nstandby > 0)
		pthread_cond_signal(&l->cv);
	else if (!l->exit && l->nthreads < l->max_threads)
		(void)start_worker(l);
	pthread_mutex_unlock(&l->mu);
}

static void end_session(struct loop *l, int error)
{
	pthread_mutex_lock(&l->mu);
	if (error && !l->error)
		l->error = error;
	if (!l->exit) {
		l->exit = true;
		pthread_cond_broadcast(&l->cv);
	}
	pthread_mutex_unlock(&l->mu);
	fuse_session_exit(l->se);
	sem_post(&l->finish);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct loop *l = w->l;

	self = w;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	for (;;) {
		pthread_mutex_lock(&l->mu);
		while (!l->role_free && !l->exit) {
			l->nstandby++;
			pthread_cond_wait(&l->cv, &l->mu);
			l->nstandby--;
		}
		if (l->exit) {
			pthread_mutex_unlock(&l->mu);
			return NULL;
		}
		l->role_free = false;
		w->reader = true;
		pthread_mutex_unlock(&l->mu);

		while (w->reader) {
			if (fuse_session_exited(l->se)) {
				end_session(l, 0);
				return NULL;
			}
			/* Only here may the main thread cancel us (unmount by
			 * signal while we wait for a request). */
			pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
			int res = fuse_session_receive_buf(l->se, &w->buf);
			pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
			if (res == -EINTR)
				continue;
			if (res <= 0) {
				end_session(l, res < 0 ? -res : 0);
				return NULL;
			}
			process(l, w);
		}
	}
}

int ubtrfs_fuse_loop(struct fuse_session *se, unsigned max_threads)
{
	struct loop l;

	const char *st = getenv("UBTRFS_REQUEST_STATS");
	stats_on = st && *st && strcmp(st, "0") != 0;
	memset(&l, 0, sizeof(l));
	l.se = se;
	l.max_threads = max_threads ? max_threads : 1;
	l.role_free = true;
	if (sem_init(&l.finish, 0, 0))
		return -errno;
	pthread_mutex_init(&l.mu, NULL);
	pthread_cond_init(&l.cv, NULL);
	pthread_mutex_lock(&l.mu);
	int ret = start_worker(&l);
	pthread_mutex_unlock(&l.mu);
	if (!ret) {
		/* Wait for the end: a worker's post, or a signal whose handler
		 * ended the session.  The handler may run just before the
		 * wait, or on another thread that does not block signals (the
		 * commit timer), so look again every second. */
		while (!fuse_session_exited(se)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			(void)sem_timedwait(&l.finish, &ts);
		}
	}
	/* From here on no thread starts (yield checks exit), so the list
	 * taken under the lock is every thread there is. */
	pthread_mutex_lock(&l.mu);
	l.exit = true;
	pthread_cond_broadcast(&l.cv);
	struct worker *all = l.workers;
	l.workers = NULL;
	pthread_mutex_unlock(&l.mu);
	/* The thread waiting in read() for a request that will not come. */
	for (struct worker *w = all; w; w = w->next)
		pthread_cancel(w->tid);
	while (all) {
		struct worker *w = all;
		pthread_join(w->tid, NULL);
		all = w->next;
		free(w->buf.mem);
		free(w);
	}
	pthread_cond_destroy(&l.cv);
	pthread_mutex_destroy(&l.mu);
	sem_destroy(&l.finish);
	stats_log();
	if (!ret && l.error && l.error != ENODEV)
		ret = -l.error;
	return ret;
}
