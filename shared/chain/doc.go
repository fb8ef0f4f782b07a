// Package chain is the chain backend contract over object storage: what a
// successor (or a star fencing its own halted epoch) does with the durable
// artifact of one star's loglet of one class. A Set is that loglet's bucket
// set: K = len(Buckets) buckets that hold every slot at the same key,
// chains/<star>/<epoch>/<slot> (format.SlotKey), and the copy quorum W.
//
// # Classification (pure)
//
// Each bucket's copy of a slot is one State: Missing (no object), Flight (a
// flight envelope whose epoch and slot match the key), Poison (a poison
// envelope whose epoch and slot match, written by any fencer), Junk (an
// object that does not parse, or an envelope of another epoch or slot:
// counted as a missing copy that cannot be overwritten) or Unknown (not
// read, or the bucket did not answer). Classify decides:
//
//	Committed  >= W flight copies
//	Dead       >= K-W+1 poisons
//	Undecided  otherwise
//
// Both are permanent (neither a flight nor a poison is ever revoked) and
// exclusive (W + K-W+1 > K). Classify does no I/O.
//
// # Fence
//
// Fence(epoch, from, nonce) walks slots from `from` upward. For each slot
// the SlotFence core (pure; a state machine its driver feeds) plans rounds:
// read the envelope (one bounded GET of bytes 0..59) of every copy it does
// not know, and PutIfAbsent its poison to copies it read as missing, only
// as many as the slot still needs to reach K-W+1 poisons. A created poison
// counts at once; ErrExists or ErrAmbiguous is read back (our poison or
// another fencer's counts as poison, a flight as a flight); a failed put or
// read is retried next round after a backoff (Set.Clock, doubling from
// Set.Backoff) until Set.RetryFor passes on that slot (ErrDeadline). A
// committed slot moves on; the first dead slot is the cut, returned. With
// one bucket down, K=3/W=2 still fences whenever the two others decide.
//
// When the copies that can never hold poison (junk and flights) leave fewer
// than K-W+1 buckets for poison, the slot can never die; after rereading
// junk copies (DefaultJunkRereads, for reads corrupted in transit) Fence
// fails with ErrStuck and writes nothing. That is never normal.
//
// Occupants are permanent and every fencer decides from them alone, so
// fencers racing each other and the deposed writer compute the same cut.
// Fence never deletes. The exhaustive interleaving test (exhaustive_test.go)
// checks this for (K,W) = (1,1), (3,2), (5,3).
//
// # Walk
//
// Walk(epoch, from, cut, fn) visits every committed slot in [from, cut) in
// order by point lookups (never List): the envelope from the first bucket
// that holds our flight, then that copy's footer range (FooterOff,
// FooterLen) parsed with format.ParseFooter; a missing, corrupt or
// unavailable copy falls through to the next bucket. A slot below the cut
// with no readable flight copy is ErrLost: immediately if every bucket
// answered without a flight, after RetryFor otherwise. Data loss is loud,
// never skipped.
//
// # ReadRange
//
// ReadRange(key, off, n, check) is one ranged read that falls through the
// set until a copy answers and passes check (a segment CRC, say); a corrupt
// or short copy is skipped, never returned. One pass, no retry: reads and
// the absorb pick their own retry policy from the error (ErrUnavailable,
// ErrNoCopy, ErrNotFound). ViewRange is the same read for a caller that
// only reads the bytes (objstore.View: they may be the bucket's own).
package chain
