/*-------------------------------------------------------------------------
 *
 * retry_storm.c
 *	  Many clients send increments; some requests are cut off after the
 *	  server may have applied them, and the clients retry with the same
 *	  operation id.  At the end: expected against actual, for a plain
 *	  counter and an idempotent one.
 *
 * Each attempt is one transaction that increments both counters, so both
 * see exactly the same fates:
 *
 *	BEGIN;
 *	UPDATE storm_plain SET value = value + 1;
 *	SELECT idempotent_increment('storm_fbf', <client>, <seq>, 1);
 *	COMMIT;
 *
 * A fraction of attempts is cut off, in one of three ways, and retried:
 *	- drop:     the client sends the request and closes the connection
 *	            without reading the answer (the server may commit or not);
 *	- kill:     another connection terminates the backend mid-request
 *	            (pg_terminate_backend);
 *	- timeout:  statement_timeout fires before COMMIT (nothing commits).
 * An attempt counts as acknowledged only when the client reads COMMIT's
 * success; then it moves to the next operation.
 *
 * With -k N, operation (client, seq) goes to key 'k<(client * 7919 + seq)
 * mod N>' (the same key on every retry); with -D, storm_fbf is distributed
 * with Citus (fbf_distribute_counter) and the requests go through the node
 * of the conninfo, a Citus coordinator; a request that fails (a worker
 * down, say) is retried after 20 ms.
 *
 * Usage: retry_storm [-d conninfo] [-c clients] [-n ops per client]
 *                    [-p cut fraction] [-s seed] [-k keys] [-D]
 * Creates (or recreates) the tables storm_plain and storm_fbf; the
 * database must have the fbf extension.  Exits 0 if the idempotent counter
 * is exact, 1 otherwise.
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

static const char *conninfo = "";
static int	nclients = 8;
static int	nops = 2000;
static double cut = 0.1;
static unsigned long long seed = 1;
static int	nkeys = 0;			/* 0: the default key */
static bool distribute = false;

typedef struct Client
{
	int			id;
	pthread_t	thread;
	uint64_t	rng;
	long		attempts;
	long		drops;
	long		kills;
	long		timeouts;
	long		errors;
} Client;

/* the cut-offs make the server talk a lot: keep quiet */
static void
ignore_notice(void *arg, const char *message)
{
	(void) arg;
	(void) message;
}

static PGconn *
connect_or_die(void)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "retry_storm: connection failed: %s", PQerrorMessage(conn));
		exit(2);
	}
	PQsetNoticeProcessor(conn, ignore_notice, NULL);
	return conn;
}

static void
exec_or_die(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "retry_storm: %s: %s", sql, PQerrorMessage(conn));
		exit(2);
	}
	PQclear(res);
}

/* run a multi-statement request to the end; true if every part succeeded */
static bool
drain_results(PGconn *conn)
{
	PGresult   *res;
	bool		ok = true;

	while ((res = PQgetResult(conn)) != NULL)
	{
		ExecStatusType st = PQresultStatus(res);

		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
			ok = false;
		PQclear(res);
	}
	return ok && PQstatus(conn) == CONNECTION_OK;
}

static void
sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static void *
run_client(void *arg)
{
	Client	   *c = arg;
	PGconn	   *conn = connect_or_die();
	PGconn	   *control = connect_or_die();
	char		sql[512];
	char		key[32];
	int			seq;

	for (seq = 1; seq <= nops; seq++)
	{
		if (nkeys > 0)
			snprintf(key, sizeof(key), "'k%d', ", (c->id * 7919 + seq) % nkeys);
		else
			key[0] = '\0';
		for (;;)
		{
			double		r = bench_uniform(&c->rng);

			c->attempts++;
			snprintf(sql, sizeof(sql),
					 "BEGIN; UPDATE storm_plain SET value = value + 1; "
					 "SELECT idempotent_increment('storm_fbf', %s%d, %d, 1); %s COMMIT;",
					 key, c->id, seq,
					 r < cut && r >= 2 * cut / 3 ? "SELECT pg_sleep(0.05);" : "");

			if (r < cut / 3)
			{
				/* drop: send, and hang up without reading the answer */
				c->drops++;
				PQsendQuery(conn, sql);
				PQflush(conn);
				sleep_us((long) (bench_uniform(&c->rng) * 3000));
				PQfinish(conn);
				conn = connect_or_die();
				continue;
			}
			if (r < 2 * cut / 3)
			{
				/* kill: terminate the backend while the request runs */
				char		kill[128];
				int			pid = PQbackendPID(conn);

				c->kills++;
				PQsendQuery(conn, sql);
				PQflush(conn);
				sleep_us((long) (bench_uniform(&c->rng) * 2000));
				snprintf(kill, sizeof(kill), "SELECT pg_terminate_backend(%d)", pid);
				exec_or_die(control, kill);
				(void) drain_results(conn);
				PQfinish(conn);
				conn = connect_or_die();
				continue;
			}
			if (r < cut)
			{
				/* timeout: the request outlives statement_timeout */
				c->timeouts++;
				exec_or_die(conn, "SET statement_timeout = '20ms'");
				PQsendQuery(conn, sql);
				(void) drain_results(conn);
				exec_or_die(conn, "ROLLBACK");
				exec_or_die(conn, "RESET statement_timeout");
				continue;
			}

			PQsendQuery(conn, sql);
			if (drain_results(conn))
				break;			/* acknowledged */
			c->errors++;
			exec_or_die(conn, "ROLLBACK");
			sleep_us(20000);
		}
	}
	PQfinish(control);
	PQfinish(conn);
	return NULL;
}

int
main(int argc, char **argv)
{
	int			opt;
	Client	   *clients;
	PGconn	   *conn;
	PGresult   *res;
	long long	plain,
				fbf,
				expected;
	long		attempts = 0,
				drops = 0,
				kills = 0,
				timeouts = 0,
				errors = 0;
	int			i;

	while ((opt = getopt(argc, argv, "d:c:n:p:s:k:D")) != -1)
	{
		switch (opt)
		{
			case 'd':
				conninfo = optarg;
				break;
			case 'c':
				nclients = atoi(optarg);
				break;
			case 'n':
				nops = atoi(optarg);
				break;
			case 'p':
				cut = atof(optarg);
				break;
			case 's':
				seed = strtoull(optarg, NULL, 10);
				break;
			case 'k':
				nkeys = atoi(optarg);
				break;
			case 'D':
				distribute = true;
				break;
			default:
				fprintf(stderr, "usage: %s [-d conninfo] [-c clients] [-n ops] [-p cut] [-s seed] [-k keys] [-D]\n", argv[0]);
				return 2;
		}
	}

	conn = connect_or_die();
	exec_or_die(conn, "DROP TABLE IF EXISTS storm_plain, storm_fbf");
	exec_or_die(conn, "CREATE TABLE storm_plain (value bigint NOT NULL)");
	exec_or_die(conn, "INSERT INTO storm_plain VALUES (0)");
	exec_or_die(conn, "SELECT fbf_create_counter_table('storm_fbf', retention => '10 min', "
				"target_fpp => 0.000001, expected_rate => 5000)");
	if (distribute)
		exec_or_die(conn, "SELECT fbf_distribute_counter('storm_fbf')");

	clients = calloc(nclients, sizeof(Client));
	for (i = 0; i < nclients; i++)
	{
		clients[i].id = i + 1;
		clients[i].rng = seed * 1000003 + i;
		pthread_create(&clients[i].thread, NULL, run_client, &clients[i]);
	}
	for (i = 0; i < nclients; i++)
	{
		pthread_join(clients[i].thread, NULL);
		attempts += clients[i].attempts;
		drops += clients[i].drops;
		kills += clients[i].kills;
		timeouts += clients[i].timeouts;
		errors += clients[i].errors;
	}

	res = PQexec(conn, "SELECT (SELECT value FROM storm_plain), "
				 "(SELECT pg_catalog.sum(value) FROM storm_fbf)");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "retry_storm: %s", PQerrorMessage(conn));
		return 2;
	}
	plain = atoll(PQgetvalue(res, 0, 0));
	fbf = atoll(PQgetvalue(res, 0, 1));
	PQclear(res);
	PQfinish(conn);

	expected = (long long) nclients * nops;
	printf("clients %d, operations %lld, attempts %ld (cut off: %ld dropped, %ld killed, %ld timed out; %ld other errors)\n",
		   nclients, expected, attempts, drops, kills, timeouts, errors);
	printf("%-20s %12s %12s %10s\n", "counter", "expected", "actual", "error");
	printf("%-20s %12lld %12lld %+9.2f%%\n", "plain UPDATE", expected, plain,
		   100.0 * (plain - expected) / expected);
	printf("%-20s %12lld %12lld %+9.2f%%\n", "idempotent (fbf)", expected, fbf,
		   100.0 * (fbf - expected) / expected);
	return fbf == expected ? 0 : 1;
}
