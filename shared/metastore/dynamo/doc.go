// Package dynamo is the DynamoDB implementation of metastore.Store: one table
// with a string partition key PK and a string sort key SK, laid out exactly
// as the package documentation of metastore says, built with its key helpers
// (StreamPK, RefPK/RefSK, ChainPK/HeadSK/EpochSK, TokenPK, MetaSK).
//
// # Items
//
//	PK                      SK                 attributes
//	STREAM#<name>           META               Name ID Class Star CreatedMs RetentionMs State Floor (absent when 0)
//	STREAMS                 <name>             the same (the listing item, below)
//	SID#<id>                REF#<20 digits>    StreamID FirstSeq LastSeq FirstTsMs LastTsMs Bytes
//	                                           Locations (L of M{Settled BOOL, Key S, Offset N, Length N}) Sum
//	                                           Producers (B: 40-byte producer marks, only when any)
//	                                           Carried (B: 8-byte acknowledged tail, then 40-byte marks of the carried table, ADR 0062, only when any)
//	                                           Commands (B: command state, format.AppendCommands, only when any)
//	CHAIN#<star>#<class>    HEAD               layout 1 (Indexed not set; below, "The head's layouts"):
//	                                           Epoch CheckpointEpoch CheckpointSlot SettledEpoch SettledSlot
//	                                           TrimmedEpoch TrimmedSlot AbsorbingEpoch AbsorbingSlot
//	                                           FlushedEpoch FlushedSlot (absent on heads stored before it: 0/0)
//	                                           MergedEpoch MergedSlot (absent on heads stored before it: 0/0)
//	                                           IndexedEpoch IndexedSlot (absent on heads stored before it: 0/0)
//	                                           layout 2 (Indexed set): HeadLayout (N 2), the same numbers
//	                                           under L2<name> (L2Epoch ... L2IndexedSlot, all present),
//	                                           and every layout-1 name above as the string "fenced"
//	CHAIN#<star>#<class>    EPOCH#<20 digits>  Epoch State K W Buckets (L of S) Window Nonce (B, 16) Cut
//	TOKEN#<sha256-hex>      META               Hash Prefix Ops (L of S) Description (absent when empty)
//	                                           ExpiresMs RevokedMs Parent StartsTenant (BOOL) MaxStreams AppendBytesPerSec (absent when 0, "" or false)
//	TOKENS                  <sha256-hex>       the same (the token listing item, below)
//	LEASE#<star>            META               Star Version TTLMs Holder Addr (both absent when released)
//
// Any item a conditional transaction writes may also hold WID (S, 12
// characters): the write id of the last conditional transaction that
// wrote it ("Writes" below). Decoding ignores it.
//
// Numbers are N (decimal), enums their numeric values; <class> is the class
// name (standard, express). Attribute names are part of the stored format:
// do not change them. A ref's Sum is the SHA-256 (hex) of a canonical
// encoding of all its fields; SwapRefs conditions on it to require that a
// stored ref is still exactly as the caller gave it, in one comparison that
// emulators and DynamoDB evaluate alike.
//
// Listing. ListStreams needs the streams in name order by prefix without a
// scan, so CreateStream also writes a listing item, PK "STREAMS" and SK the
// stream's name, holding a copy of the stream, in the same transaction as the
// META item; SetStreamState updates both and DeleteStream deletes both, in one
// transaction each. ListStreams is then a Query on PK "STREAMS" with
// begins_with(SK, prefix) (or SK > startAfter), strongly consistent, reading
// one item more than the page to know whether another page follows. The
// chosen alternative to a Scan with a filter, which reads the whole table
// (refs included) and comes back unordered. The listing partition is one hot
// key for stream creation, which is rare. No GSI is needed. Tokens are listed
// the same way: PutToken and DeleteToken write or delete the TOKEN item and a
// listing item (PK "TOKENS", SK the hash) in one transaction, and ListTokens
// queries PK "TOKENS" (every page; tokens are few) and filters by prefix. A
// token written before the listing item existed is not listed until it is
// put again; it still authenticates, and DeleteToken removes it.
//
// # The head's layouts
//
// A chain's head has one of two layouts, and moves from the first to the
// second once, never back: the fence that keeps every build before it
// (which knows neither the pass index's indexed passes nor, before
// 9061108, the Indexed cursor) off a chain that indexes its passes
// (design 014, "Switching a live chain"). Such a build would take an
// indexed pass for a refs pass: its settle would find no refs there and
// move the settled cursor over it, and trim would then delete the slots
// that hold its records.
//
// Layout 1 is the head as every build before the fence wrote it (the
// table above); MintEpoch creates it, and a chain keeps it while its
// Indexed cursor is 0/0. Layout 2 holds the same cursors under new names
// (L2 before the layout-1 name), HeadLayout = 2, and the string "fenced"
// under every layout-1 name. AdvanceCursor(Indexed, 0/0, checkpoint) on
// a layout-1 head is the switch: it reads the head, checks the move
// (metastore.AdvanceOn: unset, no lease, `to` the checkpoint) and puts
// the layout-2 item in one conditional Put whose condition is that every
// head attribute is still as read (a whole-item compare-and-set; a head
// that changed in between is read again, up to 4 times, then
// ErrConflict). The switch costs that one read and one write, once per
// chain; every later write is one write as before, and the item stays
// under 1 KB (one write unit) at the longest star id and the largest
// cursors: at most 924 bytes against 618 in layout 1
// (`go test ./shared/metastore/dynamo -run TestHeadLayout2Item -v`).
//
// What a build before the fence meets on a layout-2 head: its decoder
// requires a number under Epoch, CheckpointEpoch/Slot, SettledEpoch/Slot,
// TrimmedEpoch/Slot and AbsorbingEpoch/Slot (every version since the
// first, c4d3178: `git log -p shared/metastore/dynamo/codec.go`), so
// every GetHead, and every refused write that decodes the old item,
// fails with
//
//	dynamo: item CHAIN#<star>#<class>/HEAD: attribute Epoch: want a number
//
// and none of its conditions can hold: each compares a layout-1 name
// with a number (a string is never equal to a number, in DynamoDB and in
// moto) or asks that a layout-1 name be absent (the from-0/0 forms of
// Flushed, Merged and Indexed; the names are present). So its
// AdvanceCursor, BeginAbsorb, MintEpoch (takeover: Epoch = prev; a first
// mint: the item exists), PutRefs (lease check) and SettleRef (settled
// check) are refused and change nothing; it cannot fork or recreate the
// head. TestHeadFenceEarlierBuild and TestEarlierSettleCannotPassIndexedPass
// check this against a frozen copy of that build's decoders and requests
// (fence_test.go).
//
// This build reads both layouts (decodeHeadLayout) and writes each in
// its own names. A Store remembers, per chain, a head it has seen in
// layout 2 (the layout never goes back); for a chain it has not, it sends
// a write in layout 1 first, and when the condition fails on a head of
// the other layout (the old item, ALL_OLD or read) it sends it once more
// in that layout: one refused write per process and switched chain. The
// lease check of PutRefs and the settled check of SettleRef hold either
// layout's condition (OR), so they need no layout. A layout-1 head whose
// Indexed cursor is set (switched in place by a build between 9061108
// and the fence) is moved to layout 2 by the next BeginAbsorb (the same
// whole-item compare-and-set after it; a head changed in between is left
// for the pass after). Nothing deletes a head.
//
// The alternative was to move a switched head to another sort key and
// leave a tombstone at HEAD. It fences as well only if the tombstone
// holds the layout-1 names too (else the from-0/0 conditions of Flushed,
// Merged and Indexed, attribute_not_exists, would let an earlier build
// write to the tombstone), and every reader in a new process would read
// HEAD to find the head elsewhere: two items and a second read for the
// same fence. Changing the layout in place keeps one item, one read and
// one write per step.
//
// # Writes
//
// Every conditional write goes through TransactWriteItems, even a single
// item (CreateStream, SetStreamState, DeleteStream, PutRefs, SwapRefs,
// AdvanceCursor, MintEpoch, UpdateEpoch), and so do the unconditional
// two-item writes PutToken and DeleteToken. The SDK sets a ClientRequestToken
// once per call and reuses it on its own retries, so when an answer is lost
// and the SDK retries, DynamoDB recognises the retry and reports success,
// not a failed condition on our own write. An emulator may ignore the token
// (moto does, and it failed "condition failed" under load): so each
// conditional transaction also sets a random write id, WID, on its first
// Put or Update item (one suffices: the transaction is atomic), and a
// failed condition where that item holds this call's WID (its ALL_OLD
// image, else read back) is taken for the success it is. A racer making
// the same change carries another WID and still loses, so the conditions
// still elect one writer (TestLandedWriteRetried, the conformance races).
// BeginAbsorb is a plain
// conditional UpdateItem returning the new head: its condition accepts its
// own effect, so a retry is harmless there too. DeleteRefs is a
// transaction too: each Delete is conditional (see below).
//
//   - CreateStream: Put META if attribute_not_exists(PK) with ALL_OLD on
//     failure, plus Put of the listing item. A failed condition returns the
//     old item: ErrExists with the stream that is there.
//   - SetStreamState: conditions on ID and State <> deleting on both
//     items. To StreamDeleting (retire, ADR 0046): a GetItem of META, then
//     one transaction: Delete META and the listing item on condition of
//     the ID, Put the deleting item (PK "DELETING", SK the id) with the
//     fields read; the deleting item already there makes it nil.
//   - ListDeleting: a Query on PK "DELETING" (SK > startAfter), as
//     ListStreams.
//   - DeleteStream: DeleteItem of the id's deleting item, then a
//     transaction deleting META and the listing item on condition that
//     META is absent or has the ID (another ID: left alone, nil).
//   - PutRefs: a ConditionCheck that the HEAD's Absorbing (in either
//     layout) is the pass, and up
//     to 99 Puts per transaction (100 items at most) of at most
//     metastore.MaxTxRefBytes together (metastore.RefChunks: under 4 MB). A larger batch takes
//     several transactions, each atomic and each checked against the lease;
//     if the lease is lost between two, the first stay written: they are the
//     refs of that pass, which the pass holding the lease writes identically.
//   - SwapRefs: Put of the replacement at old[0]'s key and Delete of the other
//     old refs, each on condition Sum = the old ref's Sum; at most
//     metastore.MaxSwapRefs (100) items, far under 4 MB.
//   - DeleteRefs: a Delete per ref on condition attribute_not_exists(PK)
//     OR Sum = the given ref's Sum (the ref is gone already, or still the
//     one the caller read), up to metastore.MaxDeleteRefsPerTx (100) per
//     transaction; each transaction is atomic.
//   - RaiseFloor: Update of Floor on the META and listing items on
//     condition ID = id AND (no Floor OR Floor < the new floor); a failed
//     condition reads the META item to tell "already as high" (nil) from
//     a missing or recreated stream.
//   - MintEpoch: Put HEAD (layout 1) if absent (prev 0) or Update HEAD if
//     Epoch (L2Epoch in layout 2) = prev, and Put EPOCH if absent, in one
//     transaction.
//   - AdvanceCursor: Update of one cursor on condition that it is `from`;
//     for the checkpoint also that Absorbing is 0/0 or `to`, and it clears
//     Absorbing. Indexed on a layout-1 head: the switch to layout 2 (a
//     read and a whole-item conditional Put, above).
//   - MoveCursors: Update of every moved cursor on one condition: each
//     named cursor (the checkpoint as a condition only) is its move's
//     From (a layout-1 Flushed or Merged From of 0/0 also matches an
//     absent attribute). One item, in the head's layout.
//   - UpdateEpoch: Update of State and Cut on condition State = from.
//
// Sizes: every transaction is checked before it is sent (checkTx: at most
// 100 actions, each item at most 400 KB and all at most 4 MB, counted as
// DynamoDB counts, itemSize), because the emulator does not enforce these
// limits; a refusal is metastore.ErrTooLarge, as is DynamoDB's own
// ValidationException about a size.
//
// Reads are strongly consistent (GetItem and Query with ConsistentRead).
// ListStreams and ListTokens paginate with ExclusiveStartKey until the
// limit is met; QueryRefs makes one Query call for the refs from fromSeq
// and returns its page as DynamoDB does, cut by metastore.QueryPage at
// 1 MB (the emulator does not cut), so it may be short of the limit.
// RefsBefore is one Query with ScanIndexForward false, cut the same way.
//
// QueryRefs reads the last ref that starts before fromSeq (one item, backward)
// and keeps it if it reaches fromSeq, then the refs that start at or after
// fromSeq. This relies on a stream's refs not overlapping, which absorb and
// settle maintain (SwapRefs replaces adjacent refs with one that covers
// exactly their range); the general "every ref that ends at or after fromSeq"
// would need a read of every earlier ref.
//
// # Errors
//
//	DynamoDB answer                                    error
//	ConditionalCheckFailed (in a transaction or not)   ErrExists (CreateStream), ErrNotFound (the
//	                                                   item was absent: SetStreamState, AdvanceCursor,
//	                                                   BeginAbsorb, UpdateEpoch), else ErrConflict
//	TransactionCanceled: TransactionConflict,          retried TxAttempts times with backoff
//	  ThrottlingError, ProvisionedThroughputExceeded   (TxBackoff, doubling), then ErrUnavailable
//	TransactionCanceled: ValidationError               ErrInvalid
//	ProvisionedThroughputExceededException,            ErrUnavailable (after the SDK's own retries)
//	  RequestLimitExceeded, ThrottlingException,
//	  TransactionConflictException, 5xx
//	no answer (timeout, reset, context ended)          ErrUnavailable, wrapping the context error
//	ValidationException                                ErrInvalid
//	ResourceNotFoundException and other errors         returned wrapped, no sentinel (configuration)
//
// Opening a deployment's table from outside a star (Open, Check: one
// DescribeTable, no write; strand token bootstrap and localstack/token)
// answers ErrNoTable for a table that does not exist, ErrNotMetastore for
// one whose keys are not the strings PK (hash) and SK (range), naming the
// keys it has, and ErrNoRegion when neither the caller nor the SDK's
// configuration names a region. CreateTable over an existing table with
// other keys is ErrNotMetastore too. The check reads keys only: a table of
// another application keyed the same way passes it.
//
// Arguments are checked with the metastore validators before any request,
// so invalid input is ErrInvalid everywhere, and lookups of keys that no
// write accepts (a malformed name, id, chain or hash) are answered
// ErrNotFound (or nil, for deletes) without a request, as in memory: DynamoDB
// would refuse some of them (an oversized key, invalid UTF-8) outright. Which of ErrNotFound and
// ErrConflict a failed condition means is decided from the item the
// condition saw (ALL_OLD), or, when the service does not return it, a read
// right after; that read never decides whether a write happened.
//
// ErrUnavailable after a write means nothing is known to have changed
// (metastore's contract): the write may have landed. A caller that retries
// with a new call and meets ErrConflict resolves it by reading (GetEpoch and
// its nonce, GetHead).
//
// # Tests
//
// The package runs metastoretest.Run against DynamoDB on the emulator
// (package emulator: single-threaded moto, or STRAND_AWS_ENDPOINT), a fresh
// table per subtest, plus tests of the item layout, multi-transaction
// PutRefs, CreateTable, the error mapping through a proxy that answers
// chosen requests with throttling, 5xx or TransactionConflict, and the
// head's layouts (fence_test.go: a frozen copy of an earlier build's
// head decoders and requests against a switched head; a Store that has
// not seen a switched head working on it; the layout-2 item's size).
package dynamo
