/*-------------------------------------------------------------------------
 *
 * window_clock.c
 *	  Window time: the clock by which a counter's window refreshes, ages
 *	  and forgets, which follows real elapsed time and never the wall
 *	  clock.
 *
 * Retention is a promise about real time: an operation acknowledged less
 * than `retention` ago is remembered.  The wall clock cannot keep it: NTP,
 * an operator or a VM migration may step it by hours in either direction.
 * So a window keeps its own time, in microseconds:
 *
 *	- the metapage holds an anchor: window time `clock_at` at a moment when
 *	  the kernel's CLOCK_BOOTTIME read `clock_boottime`, on the boot whose
 *	  id (/proc/sys/kernel/random/boot_id) is `clock_boot`;
 *	- on that same boot, window time is clock_at + (CLOCK_BOOTTIME now -
 *	  clock_boottime): it advances exactly with elapsed time, including
 *	  while the server is stopped or the machine suspended, and no step of
 *	  the wall clock moves it.  This covers restarts, crash recovery, and a
 *	  standby or backup restored on the same machine;
 *	- on another boot (a reboot, or a standby promoted on another machine)
 *	  the elapsed time cannot be known, so window time resumes at clock_at:
 *	  the gap is taken as zero, never as what the wall clock says.  The
 *	  window then remembers operations longer than its retention by up to
 *	  the downtime, which costs false positives for one retention at most,
 *	  and never forgets one early;
 *	- every write of the metapage re-anchors (FbfWindowClockAnchor), so
 *	  clock_at is never behind a birth time stored beside it, and window
 *	  time never goes backwards.
 *
 * Window time starts at the wall clock when the window is created (or
 * upgraded from 1.0, whose birth times were wall-clock times), so the two
 * agree until the wall clock steps.  Times shown to users (last_refresh)
 * are wall-clock times derived from window time: now minus their age
 * (FbfWindowWallTime).
 *
 * A re-anchor that finds the wall clock moved more than the elapsed time
 * (by over FBF_CLOCK_STEP_LOG) logs the step once: the anchor it writes
 * absorbs it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "window/window_int.h"

/* wall-clock drift beyond elapsed time that counts as a step, microseconds */
#define FBF_CLOCK_STEP_LOG		(1 * USECS_PER_SEC)

static bool boot_known = false;
static uint8 boot_id[16];

/*
 * The kernel's boot id, read once per process.  Where the kernel has none
 * (not Linux), the postmaster's start time stands in: elapsed time is then
 * trusted within one server run only.
 */
static const uint8 *
current_boot(void)
{
	if (!boot_known)
	{
		FILE	   *f = fopen("/proc/sys/kernel/random/boot_id", "r");
		char		text[64];
		int			n = 0;

		memset(boot_id, 0, sizeof(boot_id));
		if (f != NULL)
		{
			if (fgets(text, sizeof(text), f) != NULL)
			{
				for (char *p = text; *p != '\0' && n < 32; p++)
				{
					int			v;

					if (*p >= '0' && *p <= '9')
						v = *p - '0';
					else if (*p >= 'a' && *p <= 'f')
						v = *p - 'a' + 10;
					else
						continue;
					boot_id[n / 2] |= (uint8) (v << (n % 2 == 0 ? 4 : 0));
					n++;
				}
			}
			fclose(f);
		}
		if (n != 32)
		{
			TimestampTz start = PgStartTime;

			memset(boot_id, 0, sizeof(boot_id));
			memcpy(boot_id, &start, sizeof(start));
			boot_id[15] = 1;	/* never all zero: that means "no anchor" */
		}
		boot_known = true;
	}
	return boot_id;
}

/* CLOCK_BOOTTIME (elapsed time including suspend), in microseconds */
static int64
boottime(void)
{
	struct timespec ts;

#ifdef CLOCK_BOOTTIME
	if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
#endif
		clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * USECS_PER_SEC + ts.tv_nsec / 1000;
}

static bool
same_boot(const FbfWindowMetaPageData *meta)
{
	return (meta->features & FBF_FEATURE_CLOCK) != 0 &&
		memcmp(meta->clock_boot, current_boot(), sizeof(meta->clock_boot)) == 0;
}

/*
 * The window's time now.  A window written by 1.0 has no anchor: its
 * birth times are wall-clock times, and so is its time until the upgrade.
 */
int64
FbfWindowNow(const FbfWindowMetaPageData *meta)
{
	if ((meta->features & FBF_FEATURE_CLOCK) == 0)
		return GetCurrentTimestamp();
	if (same_boot(meta))
		return meta->clock_at + Max(boottime() - meta->clock_boottime, 0);
	return meta->clock_at;
}

/* Does the window's clock need an anchor on this boot? */
bool
FbfWindowClockStale(const FbfWindowMetaPageData *meta)
{
	return !same_boot(meta);
}

/*
 * Re-anchor the clock of *meta at window time `now` (which the caller read
 * with FbfWindowNow under the same exclusive metapage lock), logging a wall
 * clock step if this anchor finds one.  The caller writes the metapage.
 */
void
FbfWindowClockAnchor(Relation index, FbfWindowMetaPageData *meta, int64 now)
{
	int64		boot_now = boottime();
	TimestampTz wall_now = GetCurrentTimestamp();

	if (same_boot(meta))
	{
		int64		elapsed = boot_now - meta->clock_boottime;
		int64		step = (wall_now - meta->clock_wall) - elapsed;

		/* the time since `now` was read counts too */
		now = Max(now, meta->clock_at + Max(elapsed, 0));

		/*
		 * Server log only: the caller holds the metapage's buffer lock, and a
		 * message to the client could block on its socket.  The table's name
		 * comes from the syscache entry of a relation the caller has open.
		 */
		if (step > FBF_CLOCK_STEP_LOG || step < -FBF_CLOCK_STEP_LOG)
			ereport(LOG_SERVER_ONLY,
					(errmsg("fbf: wall clock step of %+.3f s detected by counter \"%s\"",
							step / 1e6, get_rel_name(index->rd_index->indrelid)),
					 errdetail("The counter's filter follows elapsed time, not the wall clock: the step changes no retention.")));
	}
	meta->clock_at = Max(now, meta->clock_at);
	meta->clock_boottime = boot_now;
	meta->clock_wall = wall_now;
	memcpy(meta->clock_boot, current_boot(), sizeof(meta->clock_boot));
	meta->features |= FBF_FEATURE_CLOCK;
}

/*
 * A window time as a wall-clock time: now, less its age.  The markers 0
 * (unborn) and FBF_BORN_LONG_AGO stay what they are.
 */
TimestampTz
FbfWindowWallTime(const FbfWindowMetaPageData *meta, int64 window_time)
{
	if ((meta->features & FBF_FEATURE_CLOCK) == 0 || window_time == 0 ||
		window_time == FBF_BORN_LONG_AGO)
		return window_time;
	return GetCurrentTimestamp() - (FbfWindowNow(meta) - window_time);
}
