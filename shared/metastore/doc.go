// Package metastore is strand's metadata contract: the typed operations the
// protocols need over one table (DynamoDB in production), and nothing more.
// Nothing on the write path (admission to ack) calls it.
//
// # Items (DynamoDB single-table layout)
//
//	PK                      SK              holds
//	STREAM#<name>           META            Stream: id, class, leader star, created, retention, state
//	SID#<id>                REF#<first-seq> Ref: seq range, timestamps, bytes, locations
//	CHAIN#<star>#<class>    HEAD            Head: current epoch, checkpoint/settled/trimmed cursors
//	CHAIN#<star>#<class>    EPOCH#<epoch>   Epoch: state, K, W, buckets, window, nonce, cut
//	TOKEN#<sha256-hex>      META            Token: prefix and operations (hashed bearer tokens)
//
// Sequence numbers in sort keys are zero-padded to 20 decimal digits so that
// lexical order is numeric order.
//
// # Contract
//
//   - Streams: CreateStream is create-if-absent (ErrExists with the existing
//     stream returned); GetStream returns ErrNotFound; ListStreams pages in
//     name order; SetStreamState moves a stream (matched by name and id) to a
//     new state; DeleteStream removes the META item (idempotent).
//   - Refs: PutRefs is idempotent (writing the same ref twice leaves one
//     identical item). QueryRefs returns, in seq order, the refs of a stream
//     whose range ends at or after fromSeq. LastRef returns the ref with the
//     highest first seq. SwapRefs atomically replaces old refs (which must
//     still be exactly as given, or ErrConflict) with one new ref covering
//     the same seq range. DeleteRefs is idempotent.
//   - Chain heads: GetHead returns ErrNotFound before the first mint.
//     AdvanceCursor moves one cursor forward by compare-and-set: ErrConflict
//     when the stored cursor is not `from`, ErrInvalid when `to` is not after
//     `from`. Cursors never move backward.
//   - Epochs: MintEpoch atomically writes the epoch record and moves the head
//     from prev to e.Epoch (creating the head when prev is 0): ErrConflict if
//     the head's epoch is not prev, which means a successor exists.
//     UpdateEpoch changes an epoch's state and cut by compare-and-set on its
//     state.
//
// Every implementation (memory here, metastore/bolt, metastore/dynamo)
// passes the conformance suite in metastore/metastoretest.
package metastore
