/*-------------------------------------------------------------------------
 *
 * stream_driver.c
 *	  Many logical clients number their operations and send them, with up
 *	  to W in flight each, to one or more counters at once; at the end, per
 *	  counter, how many unique operations it dismissed (false dismissals)
 *	  and how many retries it applied (of those: recoveries and double
 *	  counts).
 *
 * The workload (test/bench/stream_bench.sh runs it):
 *
 *	- C logical clients (-c, default 10,000); client c's operations go to
 *	  key 'k<c mod K>' (-k, default 10), so its stream is (key, c).
 *	- order mode (-m order): client c numbers its operations 1, 2, 3, ...
 *	  and has at most W (-w, default 8) of them in flight: it sends seq s
 *	  only when every seq below s - W + 1 is acknowledged (a sliding
 *	  window anchored on its lowest unacknowledged seq, as TCP's), so an
 *	  operation arrives at most W - 1 below the highest seq sent before it.
 *	  The operations in flight are unordered: they travel in the same or
 *	  in concurrent transactions (any of the J connections, -j), and a
 *	  batch visits its operations in the order of their hashes.
 *	- random mode (-m random): the same, but every new seq is a random
 *	  63-bit number (distinct: a bijection of (client, n)).
 *	- retries (-p, default 0.1 of the operations): a client resends an
 *	  operation it has had acknowledged, younger than half the retention
 *	  (-t seconds): one of the 64 operations below its lowest
 *	  unacknowledged one.  A retry is a duplicate: the right answer is
 *	  "dismissed".
 *	- every request is one statement, one transaction (autocommit), that
 *	  sends the same batch of B operations (-b, default 500) of one key to
 *	  every counter of -C (comma-separated), each operation adding 1:
 *
 *	    SELECT idempotent_increment('c1', $1, $2::bigint[], $3::bigint[],
 *	           $4::bigint[]), idempotent_increment('c2', $1, $2, $3, $4)
 *
 *	  so every counter sees the same operations in the same transactions.
 *	  A request that fails (a deadlock, say) is sent again, the same.
 *	- -n new (unique) operations, the retries besides, or, with -T, as
 *	  many as fit in T seconds; -R paces the whole at R operations per
 *	  second, retries included (0: as fast as it goes).
 *
 * Output, one line each, "name value" pairs for the script to read:
 *	total ops N unique U retries R seconds S rate X requests Q errors E
 *	counter NAME unique_dismissed D recovered V double_counts A
 * where D counts the unique operations a counter answered false, V the
 * retries it applied of operations it had dismissed (the retry recovered
 * them), A the retries it applied of operations it had applied: its sum is
 * U - D + V + A.
 *
 * Usage: stream_driver -C counters [-d conninfo] [-m order|random] [-n ops]
 *                      [-T seconds] [-R rate] [-c clients] [-k keys]
 *                      [-w inflight] [-j connections] [-b batch]
 *                      [-p retry fraction] [-t retention seconds] [-s seed]
 * Exits 0 when it ran (whatever it measured), 2 on a setup error.
 *
 *-------------------------------------------------------------------------
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "bench_util.h"

#define RING 128				/* acknowledgement times by seq mod RING */
#define MAX_COUNTERS 8

static const char *conninfo = "";
static bool random_mode = false;
static long long nops = 200000;
static double run_secs = 0;
static double rate = 0;
static int	nclients = 10000;
static int	nkeys = 10;
static int	inflight = 8;
static int	nconns = 4;
static int	batch = 500;
static double retry_frac = 0.1;
static double retention = 20;
static unsigned long long seed = 1;
static char *counters[MAX_COUNTERS];
static int	ncounters = 0;

typedef struct Client
{
	int64_t		lo;				/* lowest unacknowledged seq number */
	int64_t		next;			/* next seq number to send */
	uint64_t	acked;			/* bit i: lo + i acknowledged */
	double		at[RING];		/* acknowledgement time of number n */
	uint8_t		lost[RING];		/* bit j: counter j dismissed number n and
								 * no retry of it has applied since */
} Client;

typedef struct Op
{
	int			client;
	int64_t		n;				/* the client's operation number */
	int64_t		seq;			/* what is sent */
	bool		retry;
	uint8_t		answers;		/* bit j: counter j applied it */
} Op;

typedef struct Worker
{
	int			id;
	pthread_t	thread;
	uint64_t	rng;
	long long	ops;
	long long	unique;
	long long	retries;
	long long	requests;
	long long	errors;
	long long	dismissed[MAX_COUNTERS];	/* unique operations dismissed */
	long long	recovered[MAX_COUNTERS];	/* retries applied, of a dismissed
											 * unique operation */
	long long	doubled[MAX_COUNTERS];	/* retries applied again */
} Worker;

static Client *clients;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long long claimed = 0;	/* new operations handed to workers */
static double t_start;

static double
now_s(void)
{
	return bench_now_ns() * 1e-9;
}

/* a bijection of the 63-bit numbers: distinct operations, distinct seqs */
static int64_t
scramble63(uint64_t x)
{
	const uint64_t m = (UINT64_C(1) << 63) - 1;

	x &= m;
	x = (x * UINT64_C(0xbf58476d1ce4e5b9)) & m;
	x ^= x >> 31;
	x = (x * UINT64_C(0x94d049bb133111eb)) & m;
	x ^= x >> 29;
	return (int64_t) x;
}

static int64_t
seq_of(int client, int64_t n)
{
	if (!random_mode)
		return n;
	return scramble63(((uint64_t) (client + 1) << 36) | (uint64_t) n);
}

static void
sleep_s(double s)
{
	struct timespec ts = {(time_t) s, (long) ((s - (time_t) s) * 1e9)};

	nanosleep(&ts, NULL);
}

static PGconn *
connect_or_die(void)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "stream_driver: connection failed: %s", PQerrorMessage(conn));
		exit(2);
	}
	return conn;
}

/*
 * Fill ops with up to batch operations of the clients of one key, under
 * the lock; returns how many.  A client sends a new operation only inside
 * its window; a retry only of an acknowledged operation young enough.
 */
static int
make_batch(Worker *w, Op *ops, int *key)
{
	int			per_key = (nclients + nkeys - 1) / nkeys;
	int			g = (int) (bench_rand(&w->rng) % (uint64_t) nkeys);
	int			n = 0;
	int			tries;
	double		t = now_s();

	*key = g;
	pthread_mutex_lock(&lock);
	for (tries = 0; n < batch && tries < 4 * batch; tries++)
	{
		int			c = g + nkeys * (int) (bench_rand(&w->rng) % (uint64_t) per_key);
		Client	   *cl;

		if (c >= nclients)
			continue;
		if (nops > 0 && run_secs == 0 && claimed >= nops)
			break;
		cl = &clients[c];
		if (cl->lo > 1 &&
			bench_uniform(&w->rng) < retry_frac)
		{
			int64_t		back = cl->lo - 1 < 64 ? cl->lo - 1 : 64;
			int64_t		rn = cl->lo - 1 - (int64_t) (bench_rand(&w->rng) % (uint64_t) back);

			if (t - cl->at[rn % RING] > retention / 2)
				continue;
			ops[n].client = c;
			ops[n].n = rn;
			ops[n].seq = seq_of(c, rn);
			ops[n].retry = true;
			n++;
			continue;
		}
		if (cl->next >= cl->lo + inflight)
			continue;			/* its window is full */
		ops[n].client = c;
		ops[n].n = cl->next;
		ops[n].seq = seq_of(c, cl->next);
		ops[n].retry = false;
		cl->next++;
		n++;
		claimed++;
	}
	pthread_mutex_unlock(&lock);
	return n;
}

/*
 * The batch is acknowledged: slide the windows of its new operations,
 * remember which counters dismissed them, and sort the retries that a
 * counter applied into recoveries (of an operation it had dismissed) and
 * double counts.
 */
static void
ack_batch(Worker *w, const Op *ops, int n)
{
	double		t = now_s();
	int			i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < n; i++)
	{
		Client	   *cl = &clients[ops[i].client];
		int			slot = (int) (ops[i].n % RING);
		int			j;

		if (ops[i].retry)
		{
			for (j = 0; j < ncounters; j++)
			{
				if (!(ops[i].answers & (1 << j)))
					continue;
				if (cl->lost[slot] & (1 << j))
				{
					w->recovered[j]++;
					cl->lost[slot] &= ~(1 << j);
				}
				else
					w->doubled[j]++;
			}
			continue;
		}
		cl->lost[slot] = (uint8_t) (~ops[i].answers & ((1 << ncounters) - 1));
		cl->acked |= UINT64_C(1) << (ops[i].n - cl->lo);
		cl->at[slot] = t;
		while (cl->acked & 1)
		{
			cl->acked >>= 1;
			cl->lo++;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* append the decimal n to buf at *len */
static void
put_int(char *buf, size_t *len, int64_t v)
{
	*len += (size_t) sprintf(buf + *len, "%lld", (long long) v);
}

static void *
run_worker(void *arg)
{
	Worker	   *w = arg;
	PGconn	   *conn = connect_or_die();
	Op		   *ops = malloc(sizeof(Op) * batch);
	size_t		cap = (size_t) batch * 24 + 16;
	char	   *ids = malloc(cap);
	char	   *seqs = malloc(cap);
	char	   *deltas = malloc((size_t) batch * 2 + 16);
	char		keybuf[32];
	char	   *sql = malloc(256 * MAX_COUNTERS);
	size_t		sl = 0;
	Oid			types[4] = {25, 1016, 1016, 1016};	/* text, int8[] x 3 */
	PGresult   *res;
	int			j;

	sl += (size_t) sprintf(sql + sl, "SELECT ");
	for (j = 0; j < ncounters; j++)
		sl += (size_t) sprintf(sql + sl, "%sidempotent_increment('%s'::regclass, $1, $2, $3, $4)",
							   j ? ", " : "", counters[j]);
	res = PQprepare(conn, "b", sql, 4, types);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "stream_driver: prepare: %s", PQerrorMessage(conn));
		exit(2);
	}
	PQclear(res);

	for (;;)
	{
		int			key;
		int			n;
		int			i;
		size_t		li = 0,
					ls = 0,
					ld = 0;
		const char *params[4];

		if (run_secs > 0 && now_s() - t_start >= run_secs)
			break;
		n = make_batch(w, ops, &key);
		if (n == 0)
		{
			if (nops > 0 && run_secs == 0 && claimed >= nops)
				break;
			continue;			/* every window of the key full: another key */
		}
		snprintf(keybuf, sizeof(keybuf), "k%d", key);
		ids[li++] = '{';
		seqs[ls++] = '{';
		deltas[ld++] = '{';
		for (i = 0; i < n; i++)
		{
			if (i)
			{
				ids[li++] = ',';
				seqs[ls++] = ',';
				deltas[ld++] = ',';
			}
			put_int(ids, &li, ops[i].client);
			put_int(seqs, &ls, ops[i].seq);
			deltas[ld++] = '1';
		}
		ids[li++] = '}';
		ids[li] = '\0';
		seqs[ls++] = '}';
		seqs[ls] = '\0';
		deltas[ld++] = '}';
		deltas[ld] = '\0';
		params[0] = keybuf;
		params[1] = ids;
		params[2] = seqs;
		params[3] = deltas;

		for (;;)
		{
			w->requests++;
			res = PQexecPrepared(conn, "b", 4, params, NULL, NULL, 0);
			if (PQresultStatus(res) == PGRES_TUPLES_OK)
				break;
			w->errors++;
			if (w->errors <= 5)
				fprintf(stderr, "stream_driver: request failed (sent again): %s", PQerrorMessage(conn));
			PQclear(res);
			if (PQstatus(conn) != CONNECTION_OK)
			{
				PQfinish(conn);
				conn = connect_or_die();
				res = PQprepare(conn, "b", sql, 4, types);
				PQclear(res);
			}
			sleep_s(0.01);
		}
		for (j = 0; j < ncounters; j++)
		{
			const char *v = PQgetvalue(res, 0, j);

			/* "{t,f,...}": element i at 1 + 2 i */
			if ((int) strlen(v) != 2 * n + 1 && !(n == 0 && strcmp(v, "{}") == 0))
			{
				fprintf(stderr, "stream_driver: unexpected result %.40s\n", v);
				exit(2);
			}
			for (i = 0; i < n; i++)
			{
				bool		applied = v[1 + 2 * i] == 't';

				if (j == 0)
					ops[i].answers = 0;
				if (applied)
					ops[i].answers |= 1 << j;
				if (!ops[i].retry && !applied)
					w->dismissed[j]++;
			}
		}
		PQclear(res);
		ack_batch(w, ops, n);
		w->ops += n;
		for (i = 0; i < n; i++)
		{
			if (ops[i].retry)
				w->retries++;
			else
				w->unique++;
		}
		if (rate > 0)
		{
			/* this worker's share of the pace */
			double		due = t_start + w->ops / (rate / nconns);
			double		t = now_s();

			if (due > t)
				sleep_s(due - t);
		}
	}
	PQfinish(conn);
	free(ops);
	free(ids);
	free(seqs);
	free(deltas);
	free(sql);
	return NULL;
}

int
main(int argc, char **argv)
{
	int			opt;
	Worker	   *workers;
	long long	ops = 0,
				unique = 0,
				retries = 0,
				requests = 0,
				errors = 0;
	double		secs;
	int			i,
				j;
	char	   *list = NULL;

	while ((opt = getopt(argc, argv, "d:m:n:T:R:c:k:w:j:b:p:t:s:C:")) != -1)
	{
		switch (opt)
		{
			case 'd':
				conninfo = optarg;
				break;
			case 'm':
				random_mode = strcmp(optarg, "random") == 0;
				break;
			case 'n':
				nops = atoll(optarg);
				break;
			case 'T':
				run_secs = atof(optarg);
				break;
			case 'R':
				rate = atof(optarg);
				break;
			case 'c':
				nclients = atoi(optarg);
				break;
			case 'k':
				nkeys = atoi(optarg);
				break;
			case 'w':
				inflight = atoi(optarg);
				break;
			case 'j':
				nconns = atoi(optarg);
				break;
			case 'b':
				batch = atoi(optarg);
				break;
			case 'p':
				retry_frac = atof(optarg);
				break;
			case 't':
				retention = atof(optarg);
				break;
			case 's':
				seed = strtoull(optarg, NULL, 10);
				break;
			case 'C':
				list = optarg;
				break;
			default:
				goto usage;
		}
	}
	if (list == NULL || nclients < 1 || nkeys < 1 || nkeys > nclients ||
		inflight < 1 || inflight > 64 || nconns < 1 || batch < 1)
		goto usage;
	for (char *tok = strtok(list, ","); tok && ncounters < MAX_COUNTERS; tok = strtok(NULL, ","))
		counters[ncounters++] = tok;

	clients = calloc(nclients, sizeof(Client));
	for (i = 0; i < nclients; i++)
	{
		clients[i].lo = 1;
		clients[i].next = 1;
	}
	workers = calloc(nconns, sizeof(Worker));
	t_start = now_s();
	for (i = 0; i < nconns; i++)
	{
		workers[i].id = i;
		workers[i].rng = seed * 1000003 + i;
		pthread_create(&workers[i].thread, NULL, run_worker, &workers[i]);
	}
	for (i = 0; i < nconns; i++)
		pthread_join(workers[i].thread, NULL);
	secs = now_s() - t_start;
	for (i = 0; i < nconns; i++)
	{
		ops += workers[i].ops;
		unique += workers[i].unique;
		retries += workers[i].retries;
		requests += workers[i].requests;
		errors += workers[i].errors;
	}
	printf("total ops %lld unique %lld retries %lld seconds %.2f rate %.0f requests %lld errors %lld\n",
		   ops, unique, retries, secs, ops / secs, requests, errors);
	for (j = 0; j < ncounters; j++)
	{
		long long	d = 0,
					r = 0,
					a = 0;

		for (i = 0; i < nconns; i++)
		{
			d += workers[i].dismissed[j];
			r += workers[i].recovered[j];
			a += workers[i].doubled[j];
		}
		printf("counter %s unique_dismissed %lld recovered %lld double_counts %lld\n",
			   counters[j], d, r, a);
	}
	return 0;

usage:
	fprintf(stderr, "usage: %s -C counters [-d conninfo] [-m order|random] [-n ops] [-T seconds] [-R rate]\n"
			"       [-c clients] [-k keys] [-w inflight] [-j connections] [-b batch] [-p retry] [-t retention] [-s seed]\n",
			argv[0]);
	return 2;
}
