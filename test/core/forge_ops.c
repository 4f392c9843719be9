/*-------------------------------------------------------------------------
 *
 * forge_ops.c
 *	  The attack a counter's secret key defeats, as a tool for the tests:
 *	  given a counter's shape and another tenant's next operation, find
 *	  operations of one's own whose Bloom bits, under the public hash,
 *	  cover that operation's.
 *
 *	  forge_ops NPARTS NBITS NHASHES VICTIM_KEY VICTIM_CLIENT VICTIM_SEQ ATTACKER_KEY
 *
 * prints client ids (bigint), one a line, whose operations (client id,
 * seq 1) on ATTACKER_KEY set, in the victim's partition of a window of
 * NPARTS partitions of NBITS bits with NHASHES probes, every bit of the
 * victim's operation (VICTIM_CLIENT, VICTIM_SEQ) on VICTIM_KEY, as fbf
 * 1.1 hashed operations (src/counter/counter.c, FbfOperationBytes).
 * Under a window's secret key (src/window/window_key.c) the same ids set
 * bits nowhere near the victim's: test/t/025_forged_collisions.pl sends
 * them and checks that the victim's operation still applies.
 *
 *-------------------------------------------------------------------------
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fbf_core.h"
#include "fbf_hash.h"
#include "fbf_le.h"

/* the identity bytes of (client, seq) on a non-empty key, as fbf 1.1 made them */
static size_t
operation_bytes(const char *key, int64_t client, int64_t seq, unsigned char *out)
{
	size_t		klen = strlen(key);
	int			i;

	out[0] = 'I';
	for (i = 0; i < 4; i++)
		out[1 + i] = (unsigned char) (klen >> (8 * i));
	memcpy(out + 5, key, klen);
	fbf_le64_write(out + 5 + klen, (uint64_t) client);
	fbf_le64_write(out + 13 + klen, (uint64_t) seq);
	return 21 + klen;
}

int
main(int argc, char **argv)
{
	unsigned char buf[256];
	uint32_t	nparts;
	uint32_t	nbits;
	int			nhashes;
	FbfHash		victim;
	uint32_t	vpart;
	uint32_t	vprobes[FBF_MAX_HASHES];
	int			covered[FBF_MAX_HASHES] = {0};
	int			left;
	int64_t		client;

	if (argc != 8 || strlen(argv[4]) > 100 || strlen(argv[7]) > 100)
	{
		fprintf(stderr, "usage: forge_ops NPARTS NBITS NHASHES VICTIM_KEY VICTIM_CLIENT VICTIM_SEQ ATTACKER_KEY\n");
		return 2;
	}
	nparts = (uint32_t) strtoul(argv[1], NULL, 10);
	nbits = (uint32_t) strtoul(argv[2], NULL, 10);
	nhashes = atoi(argv[3]);
	if (nparts < 1 || nbits < 1 || nhashes < 1 || nhashes > FBF_MAX_HASHES)
	{
		fprintf(stderr, "forge_ops: shape out of range\n");
		return 2;
	}
	victim = fbf_hash_bytes(buf, operation_bytes(argv[4], strtoll(argv[5], NULL, 10),
												 strtoll(argv[6], NULL, 10), buf));
	vpart = fbf_part(&victim, nparts);
	fbf_probes(&victim, nhashes, nbits, vprobes);

	/* positions repeated among the victim's probes count once */
	left = nhashes;
	for (int i = 0; i < nhashes; i++)
		for (int j = 0; j < i; j++)
			if (vprobes[j] == vprobes[i] && !covered[i])
			{
				covered[i] = 1;
				left--;
			}

	for (client = 1; left > 0 && client < INT64_C(1) << 40; client++)
	{
		FbfHash		h = fbf_hash_bytes(buf, operation_bytes(argv[7], client, 1, buf));
		uint32_t	probes[FBF_MAX_HASHES];
		int			useful = 0;

		if (fbf_part(&h, nparts) != vpart)
			continue;
		fbf_probes(&h, nhashes, nbits, probes);
		for (int i = 0; i < nhashes; i++)
			for (int j = 0; j < nhashes; j++)
				if (!covered[i] && probes[j] == vprobes[i])
				{
					covered[i] = 1;
					left--;
					useful = 1;
				}
		if (useful)
			printf("%lld\n", (long long) client);
	}
	return left == 0 ? 0 : 1;
}
