/*-------------------------------------------------------------------------
 *
 * counter_op.c
 *	  Operations' identities: their bytes (FbfOperationBytes, and claims'
 *	  FbfClaimBytes), their hashes and streams under a window's keying,
 *	  the delta identities of track_mismatch, and the operations of one
 *	  call as the apply engine takes them (FbfOps): prepared from the
 *	  caller's values, claims or array arguments (checked whole first,
 *	  their size before anything is read: FbfBatchLength), then hashed and
 *	  put in the canonical order once the window is open; a batch's
 *	  answers as its boolean[].  Memory per operation is bounded: see
 *	  FBF_OPS_MAX (counter.h).
 *
 * The bottom layer of src/counter: it builds an operation's identity and
 * calls the window's hashing (FbfWindowHashOperation, once per operation)
 * and nothing else of the extension, opens no relation and takes no lock.
 *
 * The canonical order of a call's operations is by hash, then by place in
 * the caller's arrays: the window is asked in that order, whatever the
 * order of the arrays, so that two transactions whose calls share
 * operations wait for each other in one direction only (the one to reach a
 * shared operation first applies it, the other waits for it to end) and
 * never deadlock.  The hash is compared first by the low 32 bits of its h1,
 * the bits that choose an operation's chain and partition (fbf_part), so
 * that a call's operations on one chain, and on one partition page, come
 * together: the window keeps a chain locked, and indexed, across such a
 * run (FbfWindowHold).  Operations repeated within a call are one operation:
 * the first occurrence is the one asked, the others follow it in that
 * order and are dismissed (counter_engine.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/uuid.h"

#include "core/fbf_le.h"
#include "counter/counter.h"
#include "counter/counter_args.h"
#include "window/window.h"

/* ----------------------------------------------------------------------
 * Identities
 * ----------------------------------------------------------------------
 */

/*
 * The bytes of an id `id` whose type `type` is 'i' (bigint: its 8
 * little-endian bytes, written into `buf`), 'u' (uuid: its 16 bytes) or
 * anything else (text, bytea: the varlena's own bytes, detoasted).  Sets
 * *len; the result is in `buf`, in the datum or in a detoasted copy.
 */
static const unsigned char *
id_bytes(char type, Datum id, unsigned char buf[8], size_t *len)
{
	switch (type)
	{
		case 'i':
			fbf_le64_write(buf, (uint64) DatumGetInt64(id));
			*len = 8;
			return buf;
		case 'u':
			*len = UUID_LEN;
			return DatumGetUUIDP(id)->data;
		default:
			{
				struct varlena *v = PG_DETOAST_DATUM_PACKED(id);

				*len = VARSIZE_ANY_EXHDR(v);
				return (const unsigned char *) VARDATA_ANY(v);
			}
	}
}

/*
 * The identity of an operation as bytes; the window stores their hash.
 *
 *	default key '':	tag ('i' bigint, 't' text, 'u' uuid), the client id's
 *					bytes, seq's 8 little-endian bytes (1.0's format)
 *	any other key:	tag in upper case ('I', 'T', 'U'), the key's length
 *					as 4 little-endian bytes, the key's bytes, then as above
 *
 * The first byte tells the two forms apart, the length delimits the key,
 * and seq has a fixed length, so no two operations share their bytes: in
 * particular, the same (client_id, seq) sent to two keys are two
 * operations.  Returned as a bytea.
 */
bytea *
FbfOperationBytes(char tag, text *key, Datum client_id, int64 seq)
{
	unsigned char client_buf[8];
	const unsigned char *client;
	size_t		client_len;
	size_t		key_len = key ? VARSIZE_ANY_EXHDR(key) : 0;
	size_t		head_len = key_len > 0 ? 1 + 4 + key_len : 1;
	bytea	   *result;
	unsigned char *p;

	client = id_bytes(tag, client_id, client_buf, &client_len);
	if (key_len > (size_t) PG_INT32_MAX)
		elog(ERROR, "fbf: key too long");
	result = palloc(VARHDRSZ + head_len + client_len + 8);
	SET_VARSIZE(result, VARHDRSZ + head_len + client_len + 8);
	p = (unsigned char *) VARDATA(result);
	if (key_len > 0)
	{
		p[0] = (unsigned char) (tag - 'a' + 'A');
		fbf_le32_write(p + 1, (uint32) key_len);
		memcpy(p + 5, VARDATA_ANY(key), key_len);
	}
	else
		p[0] = (unsigned char) tag;
	memcpy(p + head_len, client, client_len);
	fbf_le64_write(p + head_len + client_len, (uint64) seq);
	return result;
}

/*
 * The SQL type of the client ids of type `tag` (FbfOperationBytes): 'i'
 * bigint, 't' text, 'u' uuid.
 */
Oid
FbfClientIdType(char tag)
{
	return tag == 'i' ? INT8OID : tag == 't' ? TEXTOID : UUIDOID;
}

/*
 * The identity bytes of a claim of `id` in a dedup table (dedup.c), a
 * Datum of the type `tag` stands for: the tag and the id's bytes, so that
 * ids of different types are different claims:
 *
 *	'n' bigint (8 little-endian bytes)	's' text (its bytes)
 *	'x' bytea (its bytes)				'g' uuid (16 bytes)
 *
 * A (client_id, seq) claim's are a counter operation's on the default key
 * (FbfOperationBytes).  Returned as a bytea in CurrentMemoryContext.
 */
bytea *
FbfClaimBytes(char tag, Datum id)
{
	unsigned char buf[8];
	const unsigned char *data;
	size_t		len;
	bytea	   *result;
	unsigned char *p;

	data = id_bytes(tag == 'n' ? 'i' : tag == 'g' ? 'u' : 'v', id, buf, &len);
	result = palloc(VARHDRSZ + 1 + len);
	SET_VARSIZE(result, VARHDRSZ + 1 + len);
	p = (unsigned char *) VARDATA(result);
	p[0] = (unsigned char) tag;
	memcpy(p + 1, data, len);
	return result;
}

/*
 * Hash one operation of `ops` (its place i) as the window whose keying is
 * `keying` is asked about it (FbfWindowHashOperation), into `op`: a
 * claim's identity bytes as they are, an increment's FbfOperationBytes.
 * An operation numbered by (client_id, seq), an increment's or a claim's,
 * is numbered in a stream, named by its bytes before the seq (the tag, the
 * key, the client id), so that the operations of one client on one key are
 * numbered in one stream (docs/design.md, "Exact streams").  On another
 * key, the identity 1.0 gave the operation (it left the key out:
 * window_legacy.c) goes with it while the window may still hold such
 * identities.
 */
static void
hash_operation(const FbfOps *ops, int i, const FbfWindowKeying *keying,
			   FbfWindowOp *op)
{
	FbfWindowIdentity id = {0};
	bytea	   *bytes;
	bytea	   *keyless = NULL;

	if (ops->ids != NULL)
		bytes = ops->ids[i];
	else
	{
		bytes = FbfOperationBytes(ops->tag, ops->key, ops->client_ids[i],
								  ops->seqs[i]);
		if (keying->keyless_too && ops->key != NULL &&
			VARSIZE_ANY_EXHDR(ops->key) > 0)
			keyless = FbfOperationBytes(ops->tag, NULL, ops->client_ids[i],
										ops->seqs[i]);
	}
	id.bytes = VARDATA(bytes);
	id.len = VARSIZE(bytes) - VARHDRSZ;
	if (ops->seqs != NULL)
	{
		Assert(id.len > 8);
		id.stream_len = id.len - 8;
		id.seq = ops->seqs[i];
	}
	if (keyless != NULL)
	{
		id.keyless = VARDATA(keyless);
		id.keyless_len = VARSIZE(keyless) - VARHDRSZ;
	}
	FbfWindowHashOperation(keying, &id, op);
	if (ops->ids == NULL)
		pfree(bytes);
	if (keyless != NULL)
		pfree(keyless);
}

/*
 * The delta identity of an operation that adds `delta`: what a counter
 * with the option track_mismatch records beside the operation when it
 * applies it, and looks up when it dismisses a retry of it.  Its bytes are
 *
 *		'd', the operation's hash (h1, h2, 8 little-endian bytes each),
 *		the delta's 8 little-endian bytes
 *
 * and the window stores their hash, under its key (`key`; zero for an
 * operation recorded under the public hash, before the window had one).
 * No operation's or claim's identity bytes begin with 'd'
 * (FbfOperationBytes; dedup.c), so a delta identity is never one of theirs;
 * and two operations share delta identities only if their own hashes are
 * equal, when the window takes them for one operation anyway.  Built on
 * the operation's hash rather than on its bytes, so that the apply engine,
 * which hashes a call's operations once (it sorts them by hash), needs
 * nothing else.
 */
FbfHash
FbfDeltaHash(const FbfHashKey *key, const FbfHash *op, int64 delta)
{
	unsigned char bytes[1 + 3 * 8];

	bytes[0] = 'd';
	fbf_le64_write(bytes + 1, op->h1);
	fbf_le64_write(bytes + 9, op->h2);
	fbf_le64_write(bytes + 17, (uint64) delta);
	return fbf_hash_keyed(key, bytes, sizeof(bytes));
}

/* ----------------------------------------------------------------------
 * The operations of one call
 * ----------------------------------------------------------------------
 */

/*
 * A call of n operations (at most FBF_OPS_MAX: the caller's n comes from
 * FbfBatchLength, or is 1), each in its place in the caller's arrays, with
 * nothing else set.
 */
static FbfOps *
ops_new(int n)
{
	FbfOps	   *ops = palloc0(sizeof(FbfOps));
	int			i;

	Assert(n <= FBF_OPS_MAX);
	ops->n = n;
	ops->place = palloc(Max(n, 1) * sizeof(int));
	for (i = 0; i < n; i++)
		ops->place[i] = i;
	return ops;
}

/*
 * The operations of one call on `key`, taking the arrays given as theirs:
 * operation k is (client_ids[k], seqs[k]) adding deltas[k], its client id
 * of type `tag`, in the caller's order until FbfOpsHash orders them.
 */
static FbfOps *
ops_adopt(char tag, text *key, int n, Datum *client_ids, int64 *seqs,
		  int64 *deltas)
{
	FbfOps	   *ops = ops_new(n);

	ops->key = key;
	ops->tag = tag;
	ops->client_ids = client_ids;
	ops->seqs = seqs;
	ops->deltas = deltas;
	return ops;
}

/*
 * The operations of one call on `key`: operation k is (client_ids[k],
 * seqs[k]) adding deltas[k], its client id of type `tag`, in the caller's
 * order until FbfOpsHash orders them.  The arrays are copied.
 */
FbfOps *
FbfOpsPrepare(char tag, text *key, int n, const Datum *client_ids,
			  const int64 *seqs, const int64 *deltas)
{
	Datum	   *my_clients = palloc(Max(n, 1) * sizeof(Datum));
	int64	   *my_seqs = palloc(Max(n, 1) * sizeof(int64));
	int64	   *my_deltas = palloc(Max(n, 1) * sizeof(int64));

	memcpy(my_clients, client_ids, n * sizeof(Datum));
	memcpy(my_seqs, seqs, n * sizeof(int64));
	memcpy(my_deltas, deltas, n * sizeof(int64));
	return ops_adopt(tag, key, n, my_clients, my_seqs, my_deltas);
}

/*
 * The claims of one call: claim k is the identity bytes ids[k] (dedup.c),
 * with no delta, in the caller's order until FbfOpsHash orders them.
 * `seqs` is NULL for claims of plain ids; for (client_id, seq) claims,
 * whose identity bytes are FbfOperationBytes', seqs[k] is claim k's seq,
 * which numbers it in its client's stream.  The array `ids` becomes the
 * result's (FbfOpsHash reorders it); `seqs` is copied.  The caller's n
 * comes from FbfBatchLength (or is 1).
 */
FbfOps *
FbfOpsFromIds(int n, bytea **ids, const int64 *seqs)
{
	FbfOps	   *ops = ops_new(n);

	ops->ids = ids;
	if (seqs != NULL)
	{
		ops->seqs = palloc(Max(n, 1) * sizeof(int64));
		memcpy(ops->seqs, seqs, n * sizeof(int64));
	}
	return ops;
}

/*
 * An operation (or a delta identity) as sort_canonical sorts it: the first
 * word of its hash with its low half on top, the second word, and its
 * index.  Compared in that order, the keys give the canonical order: by
 * the low half of h1 (the chain and partition: fbf_part), then by hash,
 * then by index (first occurrence first).  Sorted inline, they spare each
 * comparison two reads of operations scattered over the hashes.
 */
typedef struct SortKey
{
	uint64		key;			/* h1, its low half on top */
	uint64		h2;
	int			index;
} SortKey;

/* h1 with its halves swapped: the key's first word, and back */
static inline uint64
swap_halves(uint64 h1)
{
	return (h1 << 32) | (h1 >> 32);
}

static inline void
sort_key_set(SortKey *key, const FbfHash *hash, int index)
{
	key->key = swap_halves(hash->h1);
	key->h2 = hash->h2;
	key->index = index;
}

static inline int
sort_key_cmp(const SortKey *a, const SortKey *b)
{
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	if (a->h2 != b->h2)
		return a->h2 < b->h2 ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index ? 1 : 0;
}

#define ST_SORT sort_keys
#define ST_ELEMENT_TYPE SortKey
#define ST_COMPARE(a, b) sort_key_cmp(a, b)
#define ST_SCOPE static
#define ST_DEFINE
#include "lib/sort_template.h"

/*
 * Runs of this many keys are sorted alone, and merged after; a merge, and
 * a reordering (ops_gather), check for interrupts every SORT_CHECK_EVERY
 * elements they move.
 */
#define SORT_RUN			16384
#define SORT_CHECK_EVERY	65536

/*
 * Put n keys in the canonical order (sort_key_cmp), checking for
 * interrupts as it goes: a batch of millions of operations takes a
 * second to sort on a slow machine, which one sort would spend deaf to a
 * cancel.  Runs of SORT_RUN are sorted alone, then merged pairwise (a
 * bottom-up merge sort; memory: as many keys again).
 */
static void
sort_canonical(SortKey *keys, int n)
{
	SortKey    *from = keys;
	SortKey    *to;
	int			width;
	int			i;

	for (i = 0; i < n; i += SORT_RUN)
	{
		sort_keys(keys + i, Min(SORT_RUN, n - i));
		CHECK_FOR_INTERRUPTS();
	}
	if (n <= SORT_RUN)
		return;

	to = palloc(sizeof(SortKey) * n);
	for (width = SORT_RUN; width < n; width *= 2)
	{
		int			lo;
		int			moved = 0;
		SortKey    *swap;

		for (lo = 0; lo < n; lo += 2 * width)
		{
			int			mid = Min(lo + width, n);
			int			hi = Min(lo + 2 * width, n);
			int			a = lo;
			int			b = mid;
			int			k = lo;

			while (k < hi)
			{
				if (b >= hi || (a < mid && sort_key_cmp(&from[a], &from[b]) <= 0))
					to[k++] = from[a++];
				else
					to[k++] = from[b++];
				if (++moved % SORT_CHECK_EVERY == 0)
					CHECK_FOR_INTERRUPTS();
			}
		}
		swap = from;
		from = to;
		to = swap;
	}
	if (from != keys)
	{
		memcpy(keys, from, sizeof(SortKey) * n);
		pfree(from);
	}
	else
		pfree(to);
}

/*
 * Put the n elements of `size` bytes of `array` in the order `order`
 * gives (element order[k] becomes element k): gathered into a copy, then
 * copied back, so that the array stays where its owner put it.  Each read
 * is independent of the last, so the CPU overlaps their cache misses,
 * where moving the elements in place, cycle by cycle, is a chain of
 * misses, one at a time: a fifth of the time of a batch of a million.
 */
static void
gather(void *array, size_t size, const int *order, int n)
{
	char	   *copy = palloc(size * Max(n, 1));
	int			k;

	for (k = 0; k < n; k++)
	{
		switch (size)
		{
			case sizeof(int):
				((int *) copy)[k] = ((const int *) array)[order[k]];
				break;
			case sizeof(int64):
				((int64 *) copy)[k] = ((const int64 *) array)[order[k]];
				break;
			default:
				memcpy(copy + k * size, (const char *) array + order[k] * size,
					   size);
				break;
		}
		if ((k + 1) % SORT_CHECK_EVERY == 0)
			CHECK_FOR_INTERRUPTS();
	}
	memcpy(array, copy, size * n);
	pfree(copy);
}

/*
 * Put the operations in the order `order` gives (operation order[k]
 * becomes operation k), every array of `ops`, one at a time (memory: a
 * copy of the largest, the hashes).
 */
static void
ops_gather(FbfOps *ops, const int *order)
{
	int			n = ops->n;

	gather(ops->hashed, sizeof(FbfWindowOp), order, n);
	gather(ops->place, sizeof(int), order, n);
	if (ops->client_ids != NULL)
		gather(ops->client_ids, sizeof(Datum), order, n);
	if (ops->seqs != NULL)
		gather(ops->seqs, sizeof(int64), order, n);
	if (ops->deltas != NULL)
		gather(ops->deltas, sizeof(int64), order, n);
	if (ops->ids != NULL)
		gather(ops->ids, sizeof(bytea *), order, n);
}

/*
 * Hash the operations as the window whose keying is `keying` is asked
 * about them (hash_operation), and put them in the canonical order
 * (SortKey), their arrays with them; `place` keeps where each came from,
 * for the answers.  Called again if the window's key changed before
 * anything was recorded (FBF_OP_REKEYED).  Memory beyond the operations'
 * hashes: two SortKeys (24 bytes each) per operation while they are
 * sorted, then an int per operation and a copy of one array at a time
 * while they are put in order (ops_gather).
 */
void
FbfOpsHash(FbfOps *ops, const FbfWindowKeying *keying)
{
	int			n = ops->n;
	SortKey    *keys;
	int		   *order;
	int			k;

	if (ops->hashed == NULL)
		ops->hashed = palloc(Max(n, 1) * sizeof(FbfWindowOp));
	if (n < 2)
	{
		if (n == 1)
			hash_operation(ops, 0, keying, &ops->hashed[0]);
		return;
	}

	keys = palloc(n * sizeof(SortKey));
	for (k = 0; k < n; k++)
	{
		hash_operation(ops, k, keying, &ops->hashed[k]);
		sort_key_set(&keys[k], &ops->hashed[k].hash, k);
		CHECK_FOR_INTERRUPTS();
	}
	sort_canonical(keys, n);
	order = palloc(n * sizeof(int));
	for (k = 0; k < n; k++)
		order[k] = keys[k].index;
	pfree(keys);
	ops_gather(ops, order);
	pfree(order);
}

/*
 * The delta identities (FbfDeltaHash) under `keying`'s key of a call's
 * operations, hashed (FbfOpsHash), in their own canonical order, each
 * with its operation's index (palloc'd, ops->n of them).  A delta identity
 * lies on another chain than its operation's, so the engine asks the
 * window about them in that order, a chain at a time, after the
 * operations themselves: asked each beside its operation, they would make
 * a batch's hold let go of the operation's chain at every step, and each
 * operation lock and search every page of it again.  (Their twins under
 * the public hash, while the window asks that, are for the caller to
 * hash: few calls need them.)  Memory: an FbfDeltaId (24 bytes) per
 * operation, and twice that while they are sorted.
 */
FbfDeltaId *
FbfOpsDeltas(const FbfOps *ops, const FbfWindowKeying *keying)
{
	int			n = ops->n;
	SortKey    *keys = palloc(Max(n, 1) * sizeof(SortKey));
	FbfDeltaId *deltas;
	int			k;

	Assert(ops->hashed != NULL && ops->deltas != NULL);
	for (k = 0; k < n; k++)
	{
		FbfHash		hash = FbfDeltaHash(&keying->key, &ops->hashed[k].hash,
										ops->deltas[k]);

		sort_key_set(&keys[k], &hash, k);
		CHECK_FOR_INTERRUPTS();
	}
	sort_canonical(keys, n);

	deltas = palloc(Max(n, 1) * sizeof(FbfDeltaId));
	for (k = 0; k < n; k++)
	{
		deltas[k].hash.h1 = swap_halves(keys[k].key);
		deltas[k].hash.h2 = keys[k].h2;
		deltas[k].op = keys[k].index;
	}
	pfree(keys);
	return deltas;
}

/* ----------------------------------------------------------------------
 * Batches: array arguments and answers
 * ----------------------------------------------------------------------
 */

/*
 * The number of elements of `array` (the argument `name` of the SQL
 * function `fname`): the one check of a batch's size, 54000 beyond
 * FBF_OPS_MAX, made from the array's dimensions before anything is read
 * or allocated per element.
 */
int
FbfBatchLength(ArrayType *array, const char *fname, const char *name)
{
	int			n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));

	if (n > FBF_OPS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s of %s has %d elements, more than the %d a batch may have",
						name, fname, n, FBF_OPS_MAX),
				 errhint("Send the batch in calls of at most %d operations.",
						 FBF_OPS_MAX)));
	return n;
}

/*
 * Read the elements of `array` (the argument `name` of `fname`, its
 * dimensions checked by the caller) into a new array, *datums or, for an
 * array of bigint, *ints; error (22004) if one is NULL.  Elements of a
 * type passed by reference point into `array`.  Returns their number.
 */
static int
array_read(ArrayType *array, const char *fname, const char *name,
		   Datum **datums, int64 **ints)
{
	int			n = FbfBatchLength(array, fname, name);
	ArrayIterator it;
	Datum		d;
	bool		isnull;
	int			i;

	if (datums != NULL)
		*datums = palloc(Max(n, 1) * sizeof(Datum));
	else
		*ints = palloc(Max(n, 1) * sizeof(int64));
	it = array_create_iterator(array, 0, NULL);
	for (i = 0; array_iterate(it, &d, &isnull); i++)
	{
		Assert(i < n);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s of %s must not contain nulls", name, fname),
					 errdetail("Element %d is null.", i + 1)));
		if (datums != NULL)
			(*datums)[i] = d;
		else
			(*ints)[i] = DatumGetInt64(d);
	}
	array_free_iterator(it);
	Assert(i == n);
	return n;
}

/*
 * The elements of `array` (the argument `name` of the SQL function
 * `fname`, its dimensions checked by the caller) into *elems, after its
 * size (FbfBatchLength); error (22004) if one is NULL.  Returns their
 * number.  Batches of operations and of claims (dedup.c) share it.
 */
int
FbfArrayElements(ArrayType *array, const char *fname, const char *name,
				 Datum **elems)
{
	return array_read(array, fname, name, elems, NULL);
}

/* FbfArrayElements of a bigint array, as int64 values */
int
FbfArrayInt64s(ArrayType *array, const char *fname, const char *name,
			   int64 **values)
{
	Assert(ARR_ELEMTYPE(array) == INT8OID);
	return array_read(array, fname, name, NULL, values);
}

/*
 * The array argument `argno` (`name` of `fname`), of type `elemtype`: one
 * dimension (or none, empty).  Returns its number of elements
 * (FbfBatchLength).
 */
static int
batch_array(FunctionCallInfo fcinfo, int argno, const char *fname,
			const char *name, Oid elemtype, ArrayType **array)
{
	*array = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(*array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s of %s must have one dimension", name, fname),
				 errdetail("It has %d.", ARR_NDIM(*array))));
	if (ARR_ELEMTYPE(*array) != elemtype)
		elog(ERROR, "fbf: %s has element type %u, not %u", name,
			 ARR_ELEMTYPE(*array), elemtype);
	return FbfBatchLength(*array, fname, name);
}

/*
 * The operations of a call of `fname` on `key` given as the array
 * arguments a_clients (client ids, of type `tag`), a_clients + 1 (seqs)
 * and a_clients + 2 (deltas): checked whole before anything is read (22004
 * for NULLs, 2202E for shapes, 54000 for sizes: FbfBatchLength), then read
 * into the operations' own arrays.
 */
FbfOps *
FbfOpsFromArrays(FunctionCallInfo fcinfo, char tag, text *key, int a_clients,
				 const char *fname)
{
	Oid			client_type = FbfClientIdType(tag);
	ArrayType  *clients;
	ArrayType  *seqs;
	ArrayType  *deltas;
	Datum	   *client_ids;
	int64	   *seq_values;
	int64	   *delta_values;
	int			n;

	FbfRequireArg(fcinfo, a_clients, fname, "client_ids");
	FbfRequireArg(fcinfo, a_clients + 1, fname, "seqs");
	FbfRequireArg(fcinfo, a_clients + 2, fname, "deltas");
	n = batch_array(fcinfo, a_clients, fname, "client_ids", client_type,
					&clients);
	if (batch_array(fcinfo, a_clients + 1, fname, "seqs", INT8OID, &seqs) != n ||
		batch_array(fcinfo, a_clients + 2, fname, "deltas", INT8OID, &deltas) != n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("client_ids, seqs and deltas of %s must have the same length",
						fname)));
	FbfArrayElements(clients, fname, "client_ids", &client_ids);
	FbfArrayInt64s(seqs, fname, "seqs", &seq_values);
	FbfArrayInt64s(deltas, fname, "deltas", &delta_values);
	return ops_adopt(tag, key, n, client_ids, seq_values, delta_values);
}

/*
 * The n values of type `type` as a one-dimensional array (empty for none):
 * the arrays a routed call sends (src/citus).
 */
ArrayType *
FbfArrayBuild(const Datum *values, int n, Oid type)
{
	int16		len;
	bool		byval;
	char		align;

	if (n == 0)
		return construct_empty_array(type);
	get_typlenbyvalalign(type, &len, &byval, &align);
	return construct_array((Datum *) values, n, type, len, byval, align);
}

/*
 * The n integers `values` as an array of `type`, as a Datum: INT8OID
 * (`values` are int64s: seqs, deltas, shard ids) or INT4OID (int32s:
 * anchors); what a routed call, or a call of Citus' functions, sends
 * (src/citus).
 */
Datum
FbfArrayBuildInts(Oid type, const void *values, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	Assert(type == INT8OID || type == INT4OID);
	for (i = 0; i < n; i++)
		elems[i] = type == INT8OID ?
			Int64GetDatum(((const int64 *) values)[i]) :
			Int32GetDatum(((const int32 *) values)[i]);
	return PointerGetDatum(FbfArrayBuild(elems, n, type));
}

/*
 * A call's answers (answers[k] for the caller's operation k) as the
 * boolean[] it returns, built in place: a byte per answer.
 */
ArrayType *
FbfAnswersArray(const bool *answers, int n)
{
	ArrayType  *result;
	Size		nbytes;
	char	   *data;
	int			i;

	if (n == 0)
		return construct_empty_array(BOOLOID);
	nbytes = ARR_OVERHEAD_NONULLS(1) + n;
	result = palloc0(nbytes);
	SET_VARSIZE(result, nbytes);
	result->ndim = 1;
	result->dataoffset = 0;
	result->elemtype = BOOLOID;
	ARR_DIMS(result)[0] = n;
	ARR_LBOUND(result)[0] = 1;
	data = (char *) result + ARR_OVERHEAD_NONULLS(1);
	for (i = 0; i < n; i++)
		data[i] = answers[i] ? 1 : 0;
	return result;
}
