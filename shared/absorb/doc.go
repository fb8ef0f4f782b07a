// Package absorb turns committed chain slots into span refs: for each pass
// over a run of slots it writes one ref per stream (the stream's seq range
// and the byte ranges of its segments in those slots) and advances the
// chain's checkpoint by compare-and-set. The star observes the checkpoint,
// frees backlog tokens and drops absorbed flights from its flight index.
//
// # Triggers
//
// Release events (Event; SQS FIFO, one message group per chain) carry the
// star's released head: every slot of its epoch below it is committed. A
// batch of events runs one Run per chain up to the highest head among its
// messages (events coalesce; an old or repeated one is a cheap no-op). A
// scheduled sweep runs every configured chain up to the last slot it can
// prove committed (W flight copies, probed by envelope reads), which is
// safe before the ack is released: a committed slot is never disowned.
// Handler dispatches both, and a bare Event (direct invocation, strand
// dev). SQS batches report failures per message (BatchItemFailures): a
// malformed message, or every message of a chain whose run failed; never
// the whole batch. A transient failure is retried inside the invocation
// (Retry), and a chain still failing has its messages made visible again
// within seconds (Visibility), so its FIFO group is not held for the
// queue's visibility timeout. No chain run starts within the invocation's
// deadline margin (Margin; Sweep, which settle and trim share, keeps it
// too): the chains left are reported failed, not timed out with the batch.
//
// # One pass, under a lease
//
// A pass is a lease recorded on the chain head (metastore.BeginAbsorb):
//
//  1. GetHead. If a pass already holds the lease (Head.Absorbing), complete
//     that one: [Checkpoint, Absorbing).
//  2. Otherwise choose to: in the checkpoint's epoch, up to the released
//     head (or the committed run, for a sweep), at most MaxSlotsPerPass
//     slots. If the checkpoint's epoch is behind the head's, that epoch is
//     fenced (passindex.ErrUnfenced otherwise): absorb up to its cut, and
//     once at the cut step the checkpoint to {epoch+1, 0} as its own move
//     (an epoch number never minted has no slots). A pass never spans two epochs.
//  3. BeginAbsorb(from, to). ErrConflict with the checkpoint still at from
//     names the pass that holds the lease: complete it instead, so every
//     pass from one checkpoint covers the same slots and writes identical
//     refs. ErrConflict with the checkpoint moved: another copy did it.
//  4. Walk the slots (chain.Walk: envelope and footer, point lookups) and
//     BuildRefs: per stream, Locations are its segments in slot order
//     (Settled false, Key format.SlotKey, object-absolute Offset and
//     Length), FirstSeq/LastSeq and timestamps from the footer entries,
//     Bytes the encoded record bytes. Seqs must be contiguous across the
//     pass (ErrGap, loud, nothing written). A stream's run is split into
//     adjacent refs wherever one would be over metastore.MaxRefBytes (64
//     KiB as a DynamoDB item; about 300 segments), deterministically.
//  5. PutRefs(chain, to, chunk) in chunks of metastore.RefChunks (at most
//     MaxPutRefsPerTx refs and MaxTxRefBytes, under DynamoDB's 100 actions
//     and 4 MB per transaction), each conditioned on the lease: ErrConflict
//     means the pass was completed by another copy, and this one stops.
//
// No pass can be pinned in a state that cannot be written: every ref a
// pass builds is under the item bound by construction, and any batch of
// them is cut into transactions DynamoDB takes. The metastore fakes refuse
// what DynamoDB refuses (ErrTooLarge), so a test cannot pass with a pass
// production would be unable to write (issue 13, finding 2). A lease left
// by a pass that an older build could not write is completed by this one:
// the pass is recomputed from the slots, and the split refs overwrite any
// unsplit ref the older build had written at the same first seq.
//  6. AdvanceCursor(Checkpoint, from, to), which also ends the lease.
//
// # Why it is safe
//
// At-least-once delivery, redelivery, reordering, a timeout in the middle
// of a pass and copies running at once all reduce to: several runs of the
// same pass [from, to), which write identical items, and one of which
// moves the checkpoint. A crash between the refs and the checkpoint CAS
// leaves the lease, which the next run completes. A stale copy of a
// completed pass can write nothing: the lease ended with the checkpoint
// CAS, so it cannot put a transit ref back over a ref settle has since
// swapped to a settled object (whose slots trim then deletes). Cursors
// only move forward.
//
// # Cost
//
// A pass costs GetHead, BeginAbsorb, one PutRefs per 99 streams (one
// DynamoDB transaction each; the items written are one per stream, more
// for a stream in more than about 300 slots of the pass, and a chunk holds
// fewer refs when they are large) and
// AdvanceCursor, however many slots and records it covers, plus a GetEpoch
// at an epoch boundary. The metastore bill is therefore passes per second
// times streams per pass, and passes per second are bounded by the event
// rate (the star publishes at most one event per chain per publish
// interval) and by one batch per chain at a time (SQS FIFO), never by the
// append rate. See docs/settlement.md for measurements.
//
// # The pass index (design 014)
//
// With Absorber.Index set (the settled bucket), step 5 writes no ref: the
// pass is indexed as a whole in one object (BuildPassIndex, the same
// walk's per-stream seq ranges, timestamps, segments and producer marks,
// in stream id order; format.PassIndex) at format.PassIndexKey(star,
// class, epoch, first slot), put if absent (PutDetermined: an object
// already there must hold identical bytes, else ErrForeign: the pass from
// a checkpoint is unique under the lease, so its index is determined).
// A pass then costs GetHead, BeginAbsorb and AdvanceCursor, two item
// writes however many streams it touched (TestItemWritesPerPass).
// Package passindex reads the window back (passindex.Window: the passes,
// the runs settle writes, the merged runs, its cache and its lookups), for
// settle, trim, the probe, reads and tail recovery (ADR 0058); this
// package writes the passes it reads.
//
// # Switching a live chain (design 014)
//
// The chain head's Indexed cursor says where indexed passes begin (zero:
// none, refs mode). The first pass with Index set on a chain whose cursor
// is zero sets it, before it begins its pass, to the checkpoint (the
// store takes it only while no pass holds the lease, only to the
// checkpoint itself, and only once). A pass is indexed when it starts at or
// after the cursor in the head that holds its lease (the one BeginAbsorb
// returns, or the one it joins), whatever the copy's switch: a copy with
// Index set completes a refs pass it joined with refs, and one with Index
// nil refuses an indexed pass (ErrIndexed, before it takes a lease).
// The window is read from the cursor on (passindex.WindowFrom,
// passindex.Window.IndexedFrom); a head without it whose window starts
// with an index (a chain indexed before the cursor existed) has its
// passes indexed from its window's start (passIndexed); the cursor is
// recorded once its window is empty.
package absorb
