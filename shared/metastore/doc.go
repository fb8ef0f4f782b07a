// Package metastore is strand's metadata contract: the typed operations the
// protocols need over one table (DynamoDB in production), and nothing more.
// Nothing on the write path (admission to ack) calls it.
//
// # Items (DynamoDB single-table layout)
//
//	PK                      SK              holds
//	STREAM#<name>           META            Stream: id, class, leader star, created, retention, state, floor
//	SID#<id>                REF#<first-seq> Ref: seq range, timestamps, bytes, locations
//	CHAIN#<star>#<class>    HEAD            Head: current epoch, checkpoint/settled/trimmed cursors, absorb lease
//	CHAIN#<star>#<class>    EPOCH#<epoch>   Epoch: state, K, W, buckets, window, nonce, cut
//	TOKEN#<sha256-hex>      META            Token: prefix, operations, description (hashed bearer tokens)
//	LEASE#<star>            META            Lease: holder, its address, version, ttl (the star's leader, ADR 0051)
//
// Sequence numbers in sort keys are zero-padded to 20 decimal digits so that
// lexical order is numeric order. <class> is the class's name (standard,
// express). The key helpers in keys.go (StreamPK, RefSK, ChainPK, EpochSK,
// ...) build every key; the strings are part of the stored format.
//
// # Contract
//
//   - Streams: CreateStream is create-if-absent (ErrExists with the existing
//     stream returned); GetStream returns ErrNotFound; ListStreams pages in
//     name order; SetStreamState moves a stream (matched by name and id) to a
//     new state, and StreamDeleting retires its name (ADR 0046): the
//     stream's item moves to the deleting partition (DeletingPK, by id),
//     GetStream and ListStreams no longer find it, and the name may be
//     created again at once; ListDeleting pages the deleting streams in id
//     order; DeleteStream removes the deleting item of an id and a META
//     item at the name only if it has that id (idempotent). MoveStream
//     changes a stream's leader star on condition that it is active with
//     that id and led by the star named (ErrConflict otherwise; a stream
//     led by the target already is a retry): the write that follows a
//     move's seal (ADR 0065).
//   - Refs: PutRefs writes the refs of one absorb pass, only while that
//     pass holds the chain's absorb lease (see below), and is idempotent
//     (writing the same ref twice leaves one identical item). QueryRefs returns, in seq order, the refs of a stream
//     whose range ends at or after fromSeq. LastRef returns the ref with the
//     highest first seq. RefsBefore returns, newest first, one page of the
//     refs that start before a seq (a backward Query: a walk back from a
//     stream's end in pages, star.RecoverStream). SwapRefs atomically replaces old refs (which must
//     still be exactly as given, or ErrConflict) with one new ref covering
//     the same seq range. DeleteRefs(refs) deletes each ref only if the
//     stored one is still exactly as given (EqualRef) or already gone
//     (idempotent); a ref that changed since the caller read it (settle
//     swapped a merged ref in at its key) is ErrConflict and the batch, or
//     in DynamoDB its transaction, deletes nothing. Every ref delete is
//     conditional on identity, as SwapRefs is: a delete by key alone could
//     remove a ref that was merged in after the read (issue 13, finding 1).
//   - Settled refs: SettleRef(chain, settled, old, repl) is how settle
//     writes the refs of data it moved out of a pass index window (design
//     014), where no ref was written by the absorb: it stores repl on the
//     condition that the chain's settled cursor is `settled` (the step is
//     current: a stale copy of a completed step writes nothing, as a stale
//     absorb pass cannot) and that the old refs are stored exactly as given
//     (they are replaced: repl starts where they start and reaches at least
//     as far, extending them with the new data; the others are deleted),
//     or, with no old refs, that the key holds nothing or exactly repl
//     already (a rerun is nil); and that repl overlaps no other stored
//     ref (SettleApart: the ref keyed last below repl's first seq ends
//     below it, and no ref is keyed in the seqs repl adds past the old
//     refs), so two settle copies of other settings, one merging the
//     previous ref and one not, cannot both write (design 014, "Level 1 as
//     built"). ErrConflict otherwise, atomically
//     (DynamoDB: one transaction of a ConditionCheck on the head, the Put,
//     the Deletes and a ConditionCheck that keeps the neighbour it read:
//     the ref before unchanged, or the key just past the old refs absent;
//     at most MaxSwapRefs items: 0 to MaxSettleOldRefs old refs).
//   - Floors: Stream.Floor is the lowest next seq a stream may reopen at.
//     RaiseFloor(name, id, floor) sets it to max(stored, floor) (the floor
//     only grows; ErrNotFound for a missing name, ErrConflict for another
//     id). Whoever deletes refs of a live stream raises the floor past them
//     first, and whoever opens a stream's tail takes max(last ref's
//     LastSeq+1, Floor): a stream's tail never moves backward, whatever
//     happens to its refs, so no seq is ever given to two records.
//   - Chain heads: GetHead returns ErrNotFound before the first mint.
//     AdvanceCursor moves one cursor forward by compare-and-set: ErrConflict
//     when the stored cursor is not `from`, ErrInvalid when `to` is not after
//     `from`. Cursors never move backward. The kinds are Checkpoint,
//     Settled, Trimmed and Flushed (design 014, level 1: every record in a
//     slot below it is behind a ref; the first mint sets it with the
//     others, and a head stored before it existed reads it as 0/0) and
//     Merged (design 014, level 2: the end of the last merged run; zero
//     until the first merge, the first mint leaves it zero, and a head
//     stored before it existed reads it as 0/0). The store does not order
//     the cursors against each other: their writers do (settle keeps
//     Flushed <= Settled and Merged <= Settled). One exception: Indexed
//     (design 014, "Switching a live chain": where the indexed passes
//     begin; zero: none) is set once, from 0/0 (another `from` is
//     ErrInvalid), and only while no pass holds the absorb lease and `to`
//     is the checkpoint itself (else ErrConflict); the first mint leaves
//     it zero, and a head stored before it existed reads it as 0/0.
//     Setting it also fences every build before the fence off the chain
//     (it would take the indexed passes for refs passes), in the store:
//     DynamoDB moves the head to a layout such a build cannot decode nor
//     meet a condition on (metastore/dynamo, "The head's layouts"); bolt
//     moves its file to format version 2, which such a build does not
//     open. Memory needs nothing: it lives and dies with one process,
//     which runs one build. Every cursor kind, the lease, SettleRef and
//     takeover work on a switched chain as before (conformance
//     SwitchedChain).
//   - MoveCursors moves settled, flushed and merged in one conditional
//     write, settle's one commit point per step (design 014): every move
//     names its cursor's From (To == From: a condition only; the
//     checkpoint may be a condition, never moved), and either every
//     cursor is at its From and each becomes its To, or ErrConflict and
//     none moves. ValidateMoves refuses (ErrInvalid, nothing changed) an
//     empty list or more than MaxMoves, a kind twice, Trimmed or Indexed,
//     a backward move, a write that moves nothing, and a move of flushed
//     or merged that does not name settled or would leave either past it
//     (or settled past a named checkpoint): the orders a head keeps
//     follow from the arguments, so no store compares cursors.
//   - Absorb lease: an absorb pass [from, to) is a lease recorded on the
//     head as Head.Absorbing = to (zero: no pass in progress).
//     BeginAbsorb(chain, from, to) takes it by compare-and-set: when the
//     checkpoint is `from` and Absorbing is zero or already `to`
//     (idempotent) it sets Absorbing = to and returns the head; when the
//     checkpoint is `from` but another pass holds the lease it returns
//     ErrConflict together with the current head, and the caller completes
//     THAT pass [from, head.Absorbing) instead of its own, so every pass
//     from one checkpoint covers the same slots and writes identical refs;
//     when the checkpoint is not `from`, ErrConflict (with the head). `to`
//     must be after `from` (ErrInvalid); ErrNotFound before the first mint.
//     PutRefs(chain, pass, refs) writes each ref on the condition that
//     Absorbing == pass, and is ErrConflict otherwise (the pass is stale or
//     already completed: the part that was refused wrote nothing).
//     AdvanceCursor(Checkpoint, from, to) completes the pass: while a lease
//     is held it succeeds only with to == Absorbing, and it clears
//     Absorbing in the same atomic step, so a stale copy of a completed
//     pass can never write a ref again (not over a ref settle has since
//     swapped to a settled object). Without a lease the checkpoint moves as
//     any cursor does (absorb uses that to step from one epoch's cut to the
//     next epoch). Settled and Trimmed ignore the lease, and MintEpoch
//     leaves it as it is. No lease target is ever reused: targets are after
//     the checkpoint, which only grows.
//   - Epochs: MintEpoch atomically writes the epoch record and moves the head
//     from prev to e.Epoch (creating the head when prev is 0): ErrConflict if
//     the head's epoch is not prev, which means a successor exists.
//     UpdateEpoch changes an epoch's state and cut by compare-and-set on its
//     state.
//   - Leadership leases (the Leases interface, lease.go; every Store
//     implements it): GetLease reads a star's lease; PutLease writes one by
//     compare-and-set on its Version (the stored one must be Version-1,
//     no item counting as 0), returning the stored lease with ErrConflict.
//     The store keeps no clock: readers time a lease on their own clocks
//     (shared/lease).
//
// # Details every implementation shares
//
// Where the contract above is silent, these hold (the conformance suite
// checks them, and keys.go has the helpers that enforce them):
//
//   - Arguments are checked before anything is written; a bad one is
//     ErrInvalid and changes nothing (ValidateStream, ValidateRef,
//     ValidatePutRefs, ValidatePass, ValidateSwap, ValidateMint,
//     ValidateAdvance, ValidateBeginAbsorb, ValidateEpochUpdate,
//     ValidateSettleRef,
//     ValidateToken, ValidateLimit). The compare-and-set decisions on a
//     head are BeginAbsorbOn, AdvanceOn, PassCurrent and SettleCurrent (with
//     SettleOn for SettleRef's refs). Stream names are 1
//     to MaxNameLen bytes of UTF-8 without control characters; stream ids are
//     32 lowercase hex digits; star ids are non-empty without '#'; token
//     hashes are 64 lowercase hex digits. Lookups of malformed keys are
//     simply ErrNotFound.
//   - Limits must be positive. ListStreams returns at most limit streams with
//     name prefix `prefix` and name > startAfter, in name order; next is ""
//     when the listing is done, otherwise the last name of a full page, to be
//     passed as the next startAfter. An implementation may return a non-empty
//     next when exactly limit streams remained; the following page is then
//     empty with next "". A page costs memory in proportion to the page,
//     not to the number of streams, in every implementation (DynamoDB: one
//     Query; bolt: a cursor; memory: an ordered name index).
//   - CreateStream takes a stream in state StreamActive. SetStreamState is
//     ErrNotFound for a missing name and ErrConflict when the id differs;
//     StreamDeleting is final (back to StreamActive is ErrConflict); setting
//     the current state again is nil (StreamDeleting again: nil, wherever
//     the name is now). DeleteStream of a missing name, and of a
//     name that holds another id (a recreated name), is nil and leaves it.
//     ListDeleting pages as ListStreams, by id; a page costs memory in
//     proportion to the page except in memory (which sorts the deleting
//     ids, a few: trim removes them).
//   - DeleteRefs takes valid refs, no key twice (ValidateDeleteRefs); the
//     empty batch is nil. A batch need not land atomically: DynamoDB
//     splits it into transactions of MaxDeleteRefsPerTx deletes, memory
//     and bolt delete it in one step.
//   - Refs: each has at least one location; locations are in seq order and
//     each carries the seq of its first record (Location.FirstSeq), which
//     lets a read skip the locations that end before its start. PutRefs overwrites a ref at the
//     same key (subject only to the lease); a batch must not hold two refs
//     with the same key; its pass is never the zero Cursor (ErrInvalid); an
//     empty batch is nil and checks nothing. A batch of any size is taken;
//     it need not land atomically: DynamoDB splits it into transactions of
//     one condition check on the head and up to MaxPutRefsPerTx puts of at
//     most MaxTxRefBytes (RefChunks), each landing whole or not at all,
//     while memory and bolt write it in one step. An invalid batch writes nothing. A ref on a chain never minted
//     is ErrConflict (there is no lease).
//     A stream's refs never overlap: callers keep that (absorb writes
//     disjoint ranges, SwapRefs replaces by their union), and QueryRefs may
//     rely on it. QueryRefs has no page token: continue from the last ref's
//     LastSeq+1. A page is what DynamoDB's Query returns: at most limit
//     refs, and it stops once 1 MB of refs has been read (QueryPage: the
//     ref that reaches MaxQueryBytes by RefSize is the page's last), so a
//     page may be shorter than limit while more refs follow. Only an empty
//     page (or a last ref ending at the largest seq) ends a listing: a
//     caller never takes a short page for the end. SwapRefs takes 1 to MaxSwapRefs old refs in seq order and
//     adjacent, of repl's stream, with repl covering exactly their range
//     (else ErrInvalid); equality of a stored ref is EqualRef (every field).
//     repl is stored at old[0]'s key; the others are deleted.
//   - MintEpoch needs e.Epoch > prev (numbers may skip, never repeat), e in
//     state EpochActive with 1 <= W <= K, K buckets, Window >= 1 and Cut 0.
//     A head missing with prev != 0 is ErrConflict. A later mint leaves the
//     cursors where they are. AdvanceCursor on a chain never minted is
//     ErrNotFound; cursors are independent of each other and of the head's
//     epoch (the store does not order checkpoint >= settled >= trimmed: the
//     protocols do).
//   - UpdateEpoch writes only State and Cut of e (the other fields are
//     fixed at mint); from must be EpochActive (a fenced epoch and its cut
//     are final, so from EpochFenced is ErrInvalid); a missing epoch is
//     ErrNotFound. PutToken overwrites. DeleteToken removes the token
//     (idempotent: a missing or malformed hash is nil). ListTokens returns
//     every token whose Prefix starts with prefix ("" = all), in hash
//     order, unpaged: tokens are few (issued by hand, not per stream).
//   - Values are copied: a store keeps no reference to a caller's slices and
//     returns none of its own. A canceled context fails the call before any
//     change.
//
// # Limits
//
// Every implementation refuses, before writing anything, what DynamoDB
// would refuse for its size, with ErrTooLarge, so no test anywhere passes
// with a write production cannot make (the emulator does not enforce
// these limits, so metastore/dynamo checks them itself before sending, and
// maps DynamoDB's own size refusals, a ValidationException or a
// cancellation reason ValidationError about a size, to ErrTooLarge too).
// DynamoDB's documented limits (Amazon DynamoDB Developer Guide,
// "Constraints in Amazon DynamoDB" and "DynamoDB item sizes and formats";
// API reference, TransactWriteItems and Query; 1 KB = 1024 bytes):
//
//	item, names and values                 400 KB     MaxItemBytes
//	TransactWriteItems actions             100        MaxTxItems
//	TransactWriteItems aggregate size      4 MB       MaxTxBytes
//	Query page                             1 MB       MaxQueryBytes (QueryRefs pages short, QueryPage)
//	partition key / sort key value         2048 / 1024 bytes
//
// Strand's own bounds inside them: a ref written (PutRefs, SwapRefs'
// replacement) has locations of at most MaxRefBytes (64 KiB by RefSize
// without its producer marks, an upper bound of DynamoDB's count; absorb
// splits a stream's run into several refs to stay under it) and at most
// MaxRefProducerMarks producer marks (40 KiB), while a ref only named (SwapRefs' old refs, DeleteRefs)
// is not bound, so a larger ref an older build stored is still settled and
// trimmed; PutRefs cuts a batch
// into transactions of at most MaxPutRefsPerTx refs and MaxTxRefBytes
// (RefChunks), so a batch of any size is written; SwapRefs holds at most
// MaxSwapRefs refs (each under MaxRefBytes plus its marks, so far under 4 MB); DeleteRefs
// at most MaxDeleteRefsPerTx per transaction; an epoch (EpochSize) and a
// token (TokenSize) are at most MaxItemBytes; a star id at most MaxStarLen
// bytes and a stream name MaxNameLen, so every key is far under its limit.
// RefSize, EpochSize and TokenSize are never below what DynamoDB counts
// for the items metastore/dynamo writes (its tests check that).
//
// Every implementation (memory here, metastore/bolt, metastore/dynamo)
// passes the conformance suite in metastore/metastoretest, which checks
// each limit.
package metastore
