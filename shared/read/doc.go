// Package read serves a stream's records: from a seq number, a timestamp or
// an offset from the tail, with limits by count and bytes, clamped to the
// acknowledged tail.
//
// # Where records come from
//
// The leader star's flight index (star.ReadIndex) holds the tail window:
// every acked record from `low` up to the tail that the absorb has not yet
// turned into refs. Everything below `low` is covered by refs
// (metastore.QueryRefs), each a seq range and the byte ranges of segments
// that hold it:
//
//   - a transit location (a segment in a chain slot) is one ranged GET that
//     falls through the class's bucket set (chain.Set.ReadRange) until a
//     copy answers and decodes as a segment of this stream with a good CRC;
//     a corrupt copy is skipped, never served. The copy that answers is
//     decoded once, by that check (its CRC is not computed twice). A GET
//     asks a second copy when the first has not answered within its hedge:
//     chain.DefaultHedge plus the body's time at 50 MB/s for a location a
//     read waits on, a second more for one fetched ahead (a timed hedge
//     fired on a machine short of CPU while the first copy's answer waited
//     to be scheduled, and fetched most bytes twice);
//   - a settled location is a ranged GET of the settled bucket (in parts of
//     PartBytes when larger), checked the same way (no other copy exists;
//     a bad one is an error).
//
// Every fetched location goes through the Reader's SegmentCache (cache.go;
// Reader.Cache): decoded segments shared by all its reads and sessions,
// keyed by stream, object key and byte range (bytes that never change),
// bounded (least recently used evicted), and single-flight: readers that
// want a location no one holds yet wait for one fetch of it. Ten readers
// catching up on one stream fetch each location once, not ten times.
//
// A read asks the index first (its `low` tells where refs end), reads refs
// for [from, low) and the index from there. With the pass index (design
// 014; Reader.Transit, a passindex.Window) the absorb writes no refs:
// below `low`, a stream's refs hold what settle moved, and its parts in
// the window [settled, checkpoint) of its chain's pass indexes (read
// after the refs, as refs with transit locations) hold the rest; a read by
// timestamp searches them by their timestamps as it does refs, bounded by
// the window's passes. A location that vanished
// between the ref lookup and the GET (settle swapped the ref, trim deleted
// the slot) is retried with fresh refs.
//
// # Holes: trimmed or torn
//
// A read never skips a seq on one observation. The metastore gives no
// snapshot across the Queries of one QueryRefs (DynamoDB: the last ref
// before from, then the refs from it; nor across the pages of one Query),
// so a SwapRefs that merges refs between them shows a hole that never
// existed (0..9, 20..29 where 0..19 and 20..29 are stored). A read takes
// only refs that continue from its next seq; at a hole it reads the
// stream's first ref (a second read, one item). Seqs below the first ref
// are trimmed (by retention) and skipped: the read goes on from the oldest
// record kept (from the index when no ref is left). A hole at or above the
// first ref is a torn view (or a trim in progress): the read queries
// again, up to 8 times (1, 2, ... 8 ms apart), then fails with metastore.ErrUnavailable
// (Unavailable to clients), never skipping it.
//
// # Starts and limits
//
//	seq        from that seq
//	timestamp  the first record with timestamp >= T (timestamps are
//	           non-decreasing per stream; refs carry their first and last
//	           timestamps, so whole refs before T are skipped unread;
//	           the first one that does not end before T is found by a
//	           binary search over seqs, at most 1 + ceil(log2(tail))
//	           metastore queries: seek.go)
//	tail off.  from tail-n (0 when n > tail)
//
// A start past the tail reads nothing and reports the tail: that is not an
// error. Limits bound the record count and the metered bytes (body plus
// header names and values, format.MeteredSize: what the 1 MiB record limit
// counts); a read returns at least one record when one is available.
//
// # Explicit trim
//
// A stream trimmed by a Trim command (star.Star.Trim) serves nothing below
// its acknowledged trim point (the Index's Commands): a read or session
// that starts below it, by seq, timestamp or tail offset, starts at it,
// and a session that was already below it skips to it. Trim removes the
// records from storage later.
//
// # Sessions
//
// Session reads from a start and then tails: it waits on the stream's own
// change channel (star.WatchStream, closed when this stream's acked tail
// moves, not when other streams of its class append) and sends records as
// they are acked. A heartbeat (no records, the tail) is due one interval
// after the last message sent, by the session's clock, whatever wakes the
// session in between.
//
// A session reads ahead (ahead.go): it keeps the decoded segments of the
// locations its current refs name next, fetched by up to AheadParallel
// ranged GETs at once within AheadBytes, and answers its ref queries from
// the refs it last queried while they reach its position; any failed step
// of a read from refs (a fetch, a torn view) drops the cached refs, and
// the retry re-queries. A plain Read does neither.
//
// All the sessions of a Reader share one Budget (budget.go; Reader.
// AheadBudget, default DefaultAheadBudget): the bytes they hold or fetch
// ahead never exceed it together (the segment cache's bytes are beside it:
// a location a session holds and the cache keeps is counted in both, and
// is in memory once). A session reads ahead only with what the
// budget grants at once (prefetch up to three quarters of it); the
// location its read needs next, when it finds no room, it waits for, after
// giving back all it holds, so that waiting sessions hold nothing and the
// holders are reading. A location is given back when the read passes it,
// when refs stop naming it, and when the session ends.
package read
