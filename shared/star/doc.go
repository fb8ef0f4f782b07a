// Package star is the write core of one star (the ECS task): it sequences
// appends, pools them, cuts flights, commits each flight to its chain slot
// in every bucket of the class's set with a conditional PUT, and releases
// acknowledgements in slot order. It implements the normative write path
// (../shared/seed/write-path.md in the design notes; docs/design in the repo).
//
// # From append to ack
//
//  1. Submit validates the batch (1..1000 records, at most 1 MiB encoded),
//     encodes it, and admits it to its class's loglet: admission waits while
//     the pool is at its budget (--s3-memory-buffer-mib, Express
//     --s3-express-memory-buffer-mib), or, while another tenant waits, the
//     batch's tenant (AppendOptions.Tenant) holds its share of it (fair.go),
//     honouring the caller's context. Under
//     the loglet lock the sequencer checks match_seq_num (a miss rejects
//     only that batch with *SeqMismatchError carrying the acknowledged
//     tail; while batches of the stream sequenced before the miss are
//     unacknowledged, the answer waits until they resolve, so it never
//     covers a batch that is only sequenced), assigns the
//     next contiguous seqs, clamps timestamps to be non-decreasing per stream
//     (0 means "now"), and appends the batch to its tenant's pool queue
//     (or to the queue holding its stream's pooled batches).
//  2. One flusher per loglet cuts the pool into a flight when the pool holds
//     a target flight of bytes, when its oldest byte is as old as the flush
//     deadline, when admission is blocked, or (IdleCut, Express by default)
//     at once when no flight of the loglet is in the air (ADR 0039), and
//     claims the flight's slot
//     inline: cut order is slot order. A flight is filled from the
//     tenants' queues by deficit round robin (fair.go). Claiming waits while the pipeline
//     window (--s3-parallel-uploads) is full or the backlog budget
//     (--s3-chain-backlog-flights, counting released-unabsorbed plus
//     in-flight flights) is reached; a backlog stall is counted and logged
//     with its diagnosed cause: metastore_slow (the absorb says its
//     metastore calls are throttled, failing or slow), epoch_settling (the
//     oldest unabsorbed flight is of an earlier epoch: the absorb has yet
//     to cross a fenced epoch after a recovery or takeover), else
//     absorb_lagging.
//  3. The flight is rendered once as a transit bundle (one segment per
//     stream, in order of first arrival) and written with PutIfAbsent to
//     chains/<star>/<epoch>/<slot> in every bucket in parallel. A copy that
//     fails transiently is retried until the commit deadline. ErrExists or
//     ErrAmbiguous is resolved by reading the envelope back: our epoch, slot
//     and nonce mean the copy is ours (a ghost PUT). At W confirms the slot
//     is durable; stragglers finish in the background.
//  4. Acks release strictly in slot order (the pure core in order.go), each
//     carrying the batch's first and last seq and the stream's tail. A
//     released ack is never disowned. Released flights stay in the flight
//     index until the absorb's checkpoint passes them (Absorbed).
//  5. After each release a notifier tells the Waker the released head
//     (coalesced), off the ack path.
//
// Nothing between admission and ack calls the metastore.
//
// # Exactly-once appends
//
// A batch may carry a producer id and the producer's batch sequence
// (AppendOptions.Producer, BatchSeq). Each stream keeps a dedupe table
// (dedupe.go, under the loglet lock, sequenced with the appends): per
// producer its latest DedupeWindow batches with their acks. Admission
// checks the table first: the next batch sequence (or any, for a producer
// the stream does not know) is admitted; a retry of a remembered batch is
// not written again and gets the original ack (same first and last seq),
// waiting while the original is in flight; a skip ahead fails with
// ErrBatchSeqGap naming the expected sequence, a sequence below the window
// with ErrBatchSeqTooOld. A producer idle for ProducerIdle (7 days) is
// forgotten, a stream remembers at most MaxProducers (the least recently
// used is forgotten first), and the star at most StarMaxProducers over all
// its streams (--dedupe-max-producers): past it the least recently used
// producer of the tenant (AppendOptions.Tenant) remembering the most is
// forgotten, in whichever stream, so one tenant's traffic forgets its own
// producers and not a smaller tenant's (issue 31). Either bound forgets
// only a producer with no batch in flight; a forgotten producer is unknown,
// so its next batch may start at any sequence and a retry of one of its
// acknowledged batches is admitted afresh (ADR 0041). "Used" means a batch
// of it acknowledged, a retry of it answered from its window, or its state
// seeded; one list per tenant (producerLRU) orders its forgettable
// producers of every stream. While every remembered producer has a batch in flight a new one
// is still remembered, and the excess is forgotten as acknowledgements make
// producers forgettable: the star remembers at most StarMaxProducers plus
// the producers with a batch in flight. Seeding goes through the same
// bounds. A retry waiting for its in-flight original answers with the
// original's ack even if the producer is forgotten as the original is
// released. The producer maps, the list and the count are guarded by one
// star-wide mutex taken inside the loglet lock and taking no other (a
// leaf lock), the windows by the loglet lock. The flight lists every
// producer batch in its batch table (format version 2), the absorb copies
// each producer's latest batches into refs, and a successor seeds the
// table from them (StreamInfo.Producers); an in-process recovery keeps the
// live table. ADR 0041. The star also carries the stream's whole table of
// acknowledged batches in some of its flights (carry.go, format version 4),
// so a successor's table is the live one's however many parts ago a batch
// was committed (RecoverStream, which reads the refs in pages, newest
// first: one or two metastore reads an open, ADR 0075). A recovered
// producer counts as seen at the recovery (a carried mark has no time),
// so the idle expiry errs late, never early (ADR 0075).
//
// # Commands: fencing and explicit trim
//
// Fence and Trim admit a command record (format.FenceRecord,
// format.TrimRecord: a record with one empty-named header) through the same
// admission as appends. Under the loglet lock, in the critical section that
// assigns seqs, every batch is checked against the stream's fencing token
// (AppendOptions.FenceToken must equal it, else ErrFenced; a fence checks
// only its optional expected token) and a command batch then changes the
// stream's command state (commands.go). So the fence record's seq splits
// the stream: batches before it were checked against the old token, those
// after it against the new. Each batch snapshots the state after it; the
// flight's command table (format version 3) states, per segment of a
// stream that has command state, the state after its last batch, so the
// absorb's refs, settle's settled refs and a successor's RecoverStream
// (StreamInfo.Commands) carry it on; an in-process recovery keeps the live
// state. Commands returns the acknowledged state (updated at release),
// which reads use to honour the trim point at once.
//
// # Moves
//
// Seal (move.go) commits a stream's move to another star (ADR 0065): a
// fence record whose body is the reserved move token (MovePrefix and the
// target star id). The stream's token becomes the seal token
// (format.SealToken: the move token and the fencing token it displaces,
// if any). Every batch
// sequenced after it is refused with *MovedError (ErrMoved) naming the
// target; a retry of a remembered producer batch still gets its original
// ack. The sealed state travels in the command table like any token, so
// a star that recovers the stream recovers the seal: Open unseals a
// stream sealed to this star (the token goes back to the one the seal
// displaced: a fenced stream's writer goes on with its token), and opens
// one sealed to another star refusing every batch.
// A client Fence may not use the move prefix (ErrBadCommand).
//
// # Halts, recovery and takeover
//
// A foreign occupant in one of our slots (a fencer's poison, junk) or a
// flight that cannot reach W copies by its commit deadline halts the epoch:
// no ack at or past the first unreleased slot releases in it. The halt's
// reason carries the store's own error (the latest failed PUT attempt), and
// every failed attempt is counted in strand_put_errors_total. With a Fencer
// configured, the star then recovers in-process: it fences its own epoch
// from its first unreleased slot or the absorb's checkpoint, whichever is
// later (a sweep may absorb committed slots before their acks release, and
// trim may then delete them), records the cut (the first slot not
// committed), mints epoch+1 by CAS, acks late the flights below the cut,
// and republishes the rest into the new epoch's first slots with the same
// seqs. Losing the mint, or finding the epoch already fenced by another
// star, means a successor exists: the loglet acks late what is committed
// below the cut and sheds leadership; pending batches fail with
// ErrNotLeader (they are not committed), and Health reports the loglet
// not leading.
//
// Producers wait on a halt at most Config.HaltWait (--halt-wait): past it,
// batches admitted before the halt fail with ErrOutcomeUnknown and
// ErrHalted (recovery may still commit them), new appends are refused with
// ErrHalted, and Health is not OK, until recovery succeeds.
//
// Start proves the buckets enforce put-if-absent (a probe key written twice
// must be refused the second time: ErrNoConditionalWrites stops the star; a
// bucket that cannot be probed now, such as one that is down, is tolerated
// while W others prove it), then, per loglet, mints epoch 1 for a new chain
// or takes over an existing one: fence the last epoch from its checkpoint,
// record the cut, absorb up to it (Absorber), and mint the next epoch. A
// lost mint (typically the old leader, deposed but alive, minting first)
// starts the takeover again after a bounded, jittered backoff, until it
// wins or Start's context ends.
// Stream tails are then recovered from refs by the caller (Open with
// StreamInfo). A mint whose answer is lost is recognised by reading the
// epoch record back: our nonce on it means the mint is ours.
//
// # Close
//
// Close stops the flushers and any recovery, and waits for them (a
// recovery never acks or republishes after Close). Pending batches fail:
// those still in the pool with ErrClosed (never written), those in a
// flight with ErrOutcomeUnknown (the flight may be at W copies, and a
// successor keeps it: retry only with match_seq_num).
// Stop(ctx) is the orderly version: it refuses new appends, waits until
// the admitted ones are acknowledged (or fail, or ctx ends), then closes.
// Quiesce(ctx) is Stop's wait without the close, reporting what is left
// pending and publishing the final release event: a process drain
// (node.Close) ends its sessions between the two.
//
// # Time and randomness
//
// The star reads time only through Config.Clock and draws nonces and
// backoff jitter only from Config.Rand, so a seeded simulation replays
// exactly.
package star
