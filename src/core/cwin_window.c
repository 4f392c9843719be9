/*-------------------------------------------------------------------------
 *
 * cwin_window.c
 *	  A cuckoo window in memory: see cwin_window.h.
 *
 *-------------------------------------------------------------------------
 */
#include "cwin_window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fbf_core.h"

bool
cwin_window_init(CwinWindow *w, uint32_t fp_bits, uint32_t nparts, int nlive,
				 size_t space, const char **why)
{
	memset(w, 0, sizeof(*w));
	if (nlive < CWIN_MIN_LIVE || nlive > CWIN_MAX_LIVE)
	{
		*why = "A window has 2 to 16 live epochs.";
		return false;
	}
	if (nparts < 1 || nparts > FBF_MAX_PARTS)
	{
		*why = "A window has 1 to 2^20 partitions.";
		return false;
	}
	if (!cwin_layout_init(&w->layout, space, fp_bits, CWIN_MAX_KICKS, why))
		return false;
	w->nparts = nparts;
	w->epochs.epoch = nlive - 1;
	w->epochs.nlive = nlive;
	for (int i = 0; i < CWIN_MAX_LIVE; i++)
		w->epochs.parts[i] = nparts;
	w->block_size = cwin_block_size(&w->layout);
	w->blocks = malloc(w->block_size * nparts);
	if (w->blocks == NULL)
	{
		*why = "Out of memory.";
		return false;
	}
	for (uint32_t p = 0; p < nparts; p++)
		cwin_block_init(&w->layout, cwin_window_block(w, p), w->epochs.epoch);
	return true;
}

void
cwin_window_free(CwinWindow *w)
{
	free(w->blocks);
	free(w->deferred);
	memset(w, 0, sizeof(*w));
}

static bool
store(CwinWindow *w, const FbfHash *hash)
{
	uint32_t	p = fbf_part(hash, w->nparts);
	CwinKey		key;

	cwin_key(&w->layout, &w->epochs, hash, &key);
	return cwin_block_insert(&w->layout, cwin_window_block(w, p), &w->epochs, &key) >= 0;
}

static void
defer(CwinWindow *w, const FbfHash *hash)
{
	if (w->ndeferred == w->deferred_cap)
	{
		size_t		cap = w->deferred_cap ? 2 * w->deferred_cap : 64;
		FbfHash    *d = realloc(w->deferred, cap * sizeof(FbfHash));

		if (d == NULL)
			abort();			/* a test or benchmark: nothing to recover */
		w->deferred = d;
		w->deferred_cap = cap;
	}
	w->deferred[w->ndeferred++] = *hash;
}

/* store what waits, now that there may be room */
static void
retry_deferred(CwinWindow *w)
{
	size_t		kept = 0;

	for (size_t i = 0; i < w->ndeferred; i++)
		if (!store(w, &w->deferred[i]))
			w->deferred[kept++] = w->deferred[i];
	w->ndeferred = kept;
}

bool
cwin_window_contains(const CwinWindow *w, const FbfHash *hash)
{
	uint32_t	p = fbf_part(hash, w->nparts);
	CwinKey		key;

	cwin_key(&w->layout, &w->epochs, hash, &key);
	if (cwin_block_contains(&w->layout, cwin_window_block(w, p), &w->epochs, &key))
		return true;
	for (size_t i = 0; i < w->ndeferred; i++)
		if (w->deferred[i].h1 == hash->h1 && w->deferred[i].h2 == hash->h2)
			return true;
	return false;
}

void
cwin_window_insert(CwinWindow *w, const FbfHash *hash)
{
	if (!store(w, hash))
	{
		w->failed_inserts++;
		defer(w, hash);
	}
}

bool
cwin_window_add(CwinWindow *w, const FbfHash *hash)
{
	if (cwin_window_contains(w, hash))
		return false;
	cwin_window_insert(w, hash);
	return true;
}

void
cwin_window_refresh(CwinWindow *w)
{
	for (int i = CWIN_MAX_LIVE - 1; i > 0; i--)
		w->epochs.parts[i] = w->epochs.parts[i - 1];
	w->epochs.parts[0] = w->nparts;
	w->epochs.epoch++;
	retry_deferred(w);
}

bool
cwin_window_split(CwinWindow *w, uint32_t factor, const char **why)
{
	uint8_t    *blocks;
	uint8_t    *children[CWIN_MAX_SPLIT];

	if ((uint64_t) w->nparts * factor > FBF_MAX_PARTS)
	{
		*why = "A window has at most 2^20 partitions.";
		return false;
	}
	blocks = malloc(w->block_size * w->nparts * factor);
	if (blocks == NULL)
	{
		*why = "Out of memory.";
		return false;
	}
	for (uint32_t q = 0; q < w->nparts; q++)
	{
		int			copies;

		for (uint32_t j = 0; j < factor && j < CWIN_MAX_SPLIT; j++)
			children[j] = blocks + ((size_t) q * factor + j) * w->block_size;
		copies = cwin_block_split(&w->layout, cwin_window_block(w, q), &w->epochs,
								  w->nparts, factor, children, why);
		if (copies < 0)
		{
			free(blocks);
			return false;
		}
		w->copies += (uint64_t) copies;
	}
	free(w->blocks);
	w->blocks = blocks;
	w->nparts *= factor;
	w->splits++;
	retry_deferred(w);
	return true;
}

uint64_t
cwin_window_live(const CwinWindow *w)
{
	uint64_t	n = 0;

	for (uint32_t p = 0; p < w->nparts; p++)
		n += cwin_block_live(cwin_window_block(w, p), &w->epochs);
	return n;
}

double
cwin_window_max_load(const CwinWindow *w)
{
	uint32_t	most = 0;

	for (uint32_t p = 0; p < w->nparts; p++)
	{
		uint32_t	n = cwin_block_live(cwin_window_block(w, p), &w->epochs);

		if (n > most)
			most = n;
	}
	return (double) most / cwin_nslots(&w->layout);
}

bool
cwin_window_wants_split(const CwinWindow *w)
{
	return w->ndeferred > 0 || cwin_window_max_load(w) > CWIN_SPLIT_LOAD;
}

double
cwin_window_estimate_fpp(const CwinWindow *w)
{
	double		sum = 0;

	for (uint32_t p = 0; p < w->nparts; p++)
	{
		const CwinHeader *h = cwin_header_c(cwin_window_block(w, p));

		/* live entries by the routing bits they have used */
		for (int i = 0; i < w->epochs.nlive; i++)
		{
			int64_t		e = w->epochs.epoch - i;
			int			used = 0;

			if (e < h->base || e > h->base + CWIN_TAGS - 1)
				continue;
			while (((uint64_t) w->epochs.parts[i] << used) < w->nparts)
				used++;
			sum += cwin_fpp(&w->layout, h->count[e & (CWIN_TAGS - 1)], used);
		}
	}
	return sum / w->nparts;
}
