// Package settle is the auditor: it moves absorbed stream data out of the
// chain (interleaved transit bundles, short-lived, possibly Express-priced)
// into per-stream settled objects in the Standard settled bucket
// (contiguous, read-optimized), swaps the refs to them, and advances the
// chain's settled cursor.
//
// # One step
//
// A Step takes the slots [Settled, min(Settled+MaxSlotsPerStep,
// Checkpoint)) of one epoch (absorb.Follow: an epoch below the checkpoint's
// ends at its fenced cut, and an epoch step moves the cursor from a cut to
// the next epoch). It walks them (chain.Walk: envelope and footer, by point
// lookups) to learn which streams rode them and their seq span, then for
// each stream, in stream id order:
//
//  1. QueryRefs from the span's first seq - 1: the stream's unsettled refs
//     in the span whose transit locations are this chain's slots (a
//     stream moved away and back has another chain's refs inside its
//     span: that chain settles them; ADR 0076), every such location a
//     slot below the checkpoint read at the start of the step, else
//     ErrNotAbsorbed (refs past the checkpoint belong to a pass that may
//     still be rewritten),
//     grouped into runs of adjacent refs, each with the settled ref just
//     before it.
//  2. Each run splits into groups of at most MaxSwapRefs-1 refs and
//     MaxObjectBytes of records. A group's records are read segment by
//     segment (transit: chain.Set.ViewRange through the bucket set, the
//     first copy whose segment CRC checks, that check the segment's only
//     one; settled: the settled bucket, checked where it is consumed; both
//     viewed, not copied: objstore.View), checked
//     against the ref (stream, contiguous seqs), and rendered into settled
//     objects (format.SettledBuilder) at format.SettledKey(stream, first,
//     last). Objects split at record boundaries, inside a ref when one ref
//     is larger than MaxObjectBytes (one absorb pass can put up to 512
//     flights of one stream in one ref), so every object holds at most
//     MaxObjectBytes of records (default 8 MiB), or one record when a
//     record is larger; and one ref points at most at MaxObjectsPerRef
//     (256) objects, so it stays a small item (a ref of over 2 GiB at the
//     default gets its records spread evenly over 256 larger objects). A read fetches a settled location whole (its one
//     CRC covers it), so this also bounds a read's fetch. Each object is
//     written as soon as it is complete: settle holds one object and one
//     segment in memory, whatever the size of the refs, and a flush up to
//     4 spans read ahead (readahead.go: 128 MiB for all of a Settler's
//     streams)
//     (BenchmarkSettleStandardBacklog, docs/performance/settle.md). The
//     objects and packs are rendered in buffers the Settler reuses (at
//     most two kept between objects: bufs.go), lent to the bucket
//     (PutIfAbsent), never given (objstore.Keeper), ADR 0072. Lengths that
//     the format's 32-bit fields cannot hold are refused
//     (format.ErrTooLong), never wrapped.
//  3. Merge small: if the ref before the first group is settled, one
//     object, smaller than MergeBelowBytes (default 4 MiB) and the merged
//     object stays under MaxObjectBytes, it is rewritten together with the
//     group, so a stream's history is not thousands of tiny objects.
//  4. PutIfAbsent each object; ErrExists or ErrAmbiguous reads it back and
//     must find identical bytes (a rerun, or a copy racing: records never
//     change, so a key's content is determined), else ErrForeign.
//  5. SwapRefs(old refs -> one settled ref with one location per object,
//     in seq order: Location{Settled, key, Offset 64
//     (format.SettledHeaderSize), Length = the segment, FirstSeq}); Bytes
//     stays the record bytes. ErrConflict means another copy (or trim) changed them:
//     re-read the stream and continue. After a swap that merged, the
//     superseded small object is deleted (refs first: no ref ever points at
//     a missing object; a reader that read the old ref just before gets
//     ErrNotFound and re-queries). A crash between object write and swap,
//     or a lost swap, leaves an orphan object that the garbage probe finds.
//
// Then the step's commit: one MoveCursors of Settled (Flushed and Merged
// as conditions, or Flushed following Settled with the pass index on);
// ErrConflict means another copy moved it first, which is fine: every
// copy computes the same work.
//
// # Safety
//
// The settled cursor moves over a slot only after every ref that points
// into it has been swapped to a settled object, so trim (which deletes
// slots below the settled cursor) never deletes bytes a ref needs. Settle
// only swaps refs entirely below the checkpoint; absorb only writes refs
// under its lease for slots at or past the checkpoint, and the checkpoint
// CAS ends the lease atomically, so the two never write the same ref.
// Redelivery, reordering, duplicate copies and a crash anywhere are safe:
// each step recomputes from the metastore and the objects, object writes
// are put-if-absent of determined content, and swaps and the cursor move
// are conditional.
//
// # On the pass index (design 014, level 1: runs, packs and flush)
//
// With PassIndex the absorb wrote no refs, only pass indexes in the
// settled bucket, from where the chain's indexed passes begin (the head's
// Indexed cursor, passindex.Window.IndexedFrom). A step that starts
// before it (or on a chain with none: still in refs mode) is a refs step
// as above, bounded at it, and moves the flushed cursor with the settled
// one (nothing below is in runs); a step at or after it takes the whole
// passes that start in its slots, from the settled cursor (which it moves
// only to pass ends, so it stays on pass boundaries), walked by key (passindex.Window), and
// writes one run: format.RunIndexKey(star, class, epoch, first slot), in
// the pass index format (a version 2 run whose command table is over
// passindex.CommandIndexMinTable first gets its command index beside it,
// format.CommandIndexKey: cmdindex.go; merged runs likewise). The run at the step's first slot is the step's
// plan: a step that finds it (a copy wrote it, or a crash before the
// head moved) adopts it as is; else it makes it (runs.go):
//
//  1. The live runs [Flushed, Settled) say, per stream, its packed entries
//     after its last marker (what is not yet behind a ref) and each run's
//     time (its latest record timestamp). The step needs only a summary
//     of them, the unflushed state (state.go): per stream its unflushed
//     bytes, the first and last seq and timestamp of those entries and
//     the run of the oldest; per live run its start and time. A settler
//     keeps it per chain across steps, keyed by the head it is of
//     (Flushed, Merged, Settled: the walk of the live runs is determined
//     by them, and the objects by their keys, so every copy derives the
//     same state); a step whose head has exactly that key uses it, and
//     updates it with its own run (a marker removes its stream, a packed
//     entry adds to it) and drops the runs below its new flushed cursor.
//     The state indexes its streams by the run of their oldest entry (per
//     live run a count and a list), so a step visits the step's streams
//     and those of the runs FlushAge old only: its state work follows
//     the step, not the active streams.
//     A merge after the step remaps it to the merged run (the group's
//     runs replaced by it). Any other head (a cold settler, a copy moved
//     a cursor) rebuilds it by streaming the live runs one at a time
//     through the window (VisitHeadRuns), so a step never holds the runs
//     together.
//  2. A stream is flushed when its unflushed bytes with the step's reach
//     FlushBytes, or when its oldest unflushed entry (the step's own, at
//     the step's time) is FlushAge older than the step's time (the latest
//     record timestamp of the live runs and the passes): never the clock,
//     so every copy decides the same. Flushes by age alone are at most
//     MaxAgeFlushes (default 8,192) a step: past it, those whose oldest
//     entry is in the oldest run first, then by id; the others wait for
//     the next steps (the hourly age flush at 1,000,000 streams, 41,667
//     streams and about 83 GETs each, is spread over about 6 steps, each
//     bounded). A flushed stream gets a marker (an entry without
//     segments: its flushed seqs).
//  3. The other streams of the step are packed: their segments copied
//     byte for byte, slot by slot (one ranged GET per slot), into packs of
//     at most MaxObjectBytes (format.PackKey: the plan's end and digest
//     in the key, planDigest), and listed in the run as entries located
//     in the packs.
//  4. The run is put if absent; one already there is adopted. The run is
//     the step's one commit point (design 014, "One commit point per
//     step"): what the step wrote before it is at keys that name what
//     determines its bytes (a pack its plan's digest: the decisions,
//     MaxObjectBytes, the order), so a plan that dies before its run
//     leaves garbage no other plan writes, whatever its configuration;
//     its command index is written after it, by the copy that stored it.
//
// Then each marker's stream is flushed as level 0 settled a stream (its
// refs ending where its parts and constants say, never MaxObjectBytes:
// settleGroups):
// its unflushed entries (pack locations: fetched for the flushed streams
// only, by one walk of the live runs from the oldest run of any of them,
// one run at a time through the window's cache, each searched for them;
// or, when a step flushes at most one stream per 2,048 unflushed, by a
// per-stream lookup of the live runs from its own oldest entry, each run
// the cache does not hold read by range: flushranged.go, the same refs)
// and the step's parts (transit locations) into per-stream settled
// objects (merged into a small
// previous one) and one ref, with metastore.SettleRef on the condition
// that the settled cursor is still the step's start (a stale copy writes
// nothing, and on the neighbouring refs: copies that merge the previous
// ref and copies that do not never both write); parts a ref already holds
// are skipped, a lost write re-reads.
// Before the flushes start, the small pieces (at most 64 KiB) of every
// flushed stream's pack locations are read by object, neighbours at most
// 256 KiB apart coalesced into one ranged GET of at most 8 MiB (16 in
// flight), into at most 64 MiB of pieces the flushes take theirs from;
// the others, a piece alone and a span that fails (its object gone) are
// read by the flush as before, with the same checks and errors
// (coalesce.go: the hourly age flush's 60 minute runs' pieces are tiny
// and, packs in stream id order, close together).
// Then the merge (level 2, below), and then the step's one commit
// (commit; ADR 0063): one metastore.MoveCursors moves Settled to the
// step's end, Flushed to the first run still holding an unflushed entry
// (or the step's end: the first run whose count in the index is not
// zero; after the refs, never before, so Flushed only ever lags) and
// Merged to the merge's end, on the condition that all three are as the
// step read them; lost to a copy, the step is Lost. No head is ever half
// a step, and only a commit moves Settled (the quiet flush moves the
// others at a fixed Settled, only while the checkpoint is there: no plan
// at Settled exists yet), so every copy that plans at a settled cursor
// plans on the same head and the settled bucket is a function of the
// absorbed input whatever the crashes and races (design 014, "Every copy
// plans on one head"; TestSettleHeadsAreWholeSteps).
//
// # Quiet chains (ADR 0057)
//
// A step with no new passes makes no plan, so the age flush, which a
// plan decides from record times, never came to a chain without new
// traffic: its live runs, their packs, the deletions that wait for them
// and the records past their retention stayed until its next append
// (issue 30). A settler with a Clock (the node's, the settle Lambda's)
// does a quiet flush in such a step (quiet.go): once the newest record
// of the live runs [max(Flushed, Indexed), Settled) is at least FlushAge
// older than the clock's now (every stream's oldest entry is then
// FlushAge old, so the next plan would flush them all), it
//  1. moves Merged to Settled (MoveCursors on the condition that Settled
//     and the checkpoint are as read: no new pass; lost: the step is
//     Lost): the live runs are sealed against merges, which would
//     compact a stream's entries across the end of a ref this flush
//     wrote (no marker records it); below Merged the window reads the
//     level-1 run where no merged run is;
//  2. flushes every stream of the state behind a ref, as a plan's
//     flushes (streamParts: SettleRef under the settled cursor, parts a
//     ref holds skipped), by oldest run then id, MaxAgeFlushes streams a
//     batch, stopping after the first batch that wrote anything;
//  3. when every stream is held, moves Flushed to Settled (on the same
//     conditions and the Flushed and Merged it read; lost: nothing).
//
// A warm settler waits longer for a chain of old record times (a
// backfill): when its newest record is over 2 FlushAge old by the clock,
// it flushes only once it has known the settled cursor where it is for
// FlushAge (quietFor), not at every idle step between its passes; a new
// settler flushes by record time.
//
// The clock decides only whether to flush, never what any object holds:
// the flush writes no run and no pack, only settled objects (keys naming
// stream and seqs, bytes the records') and refs (conditional on their
// key and the settled cursor). So copies whose clocks differ write the
// same bytes at every determined key; one that flushes early does what a
// later copy or the next plan would (its refs are skipped by them). A
// copy that plans on new passes meanwhile moves Settled: the quiet
// flush's SettleRefs fail and the step is Lost; a copy that plans on a
// new pass read a checkpoint past Settled, so the seal, conditioned on
// the checkpoint, is either before its head read or fails
// (TestQuietFlushSealRace). TestSettleKillAtEveryWrite
// draws each copy's clock, kills idle copies at every write, races a
// quiet flush with a planning copy and requires a quiet chain flushed
// within a bound; TestHandlerQuietChain pins FlushAge on both sides;
// trim.TestQuietChainFinishes has the deletion finish. A settler without
// a Clock leaves quiet chains as before.
//
// # Level 2: merged runs (design 014, "Level 2 as built")
//
// Before its commit, a step of runs merges (merge.go), from the head it
// makes (its new Settled and Flushed): from a = the first level-1 run at or after max(Flushed, Merged), when the level-1 runs from a hold a complete group (Fanout
// runs of a's epoch, or fewer ended by a later epoch's run), it writes
// the merged run at format.MergedRunKey(a): per stream, in stream id
// order, its last marker of the group, then one packed entry for its
// packed entries after that marker, their records re-encoded as one
// segment in the merged run's packs (format.MergedPackKey, with the
// digest of the merge's MaxObjectBytes: mergeDigest; the level-1
// packs read in 1 MiB ranged GETs, in order). The group is found by its
// runs' headers and its runs are read by range, mergeIndexChunk entries
// at a time each (mergestream.go), so a merge holds a few chunks per
// input run, the merged run it writes and one pack, not the group
// decoded. The group depends on immutable runs only, so copies write the
// same bytes; a merged run already stored is adopted, and so are its
// packs already stored (mergeresume.go: the packs' layout follows from
// the group's indexes, each stored pack is read back and checked), so a
// merge cut short (a timeout, a crash) resumes where it stopped. The
// step's commit moves Merged to its end. Walks read the merged run at a slot below Merged,
// else the level-1 run there (passindex.Window.HeadRuns). The level-1
// runs stay until trim passes them with Flushed. Settle shares a window
// cache when given one (Window; the node's), and loads a cold one by
// LIST and parallel GETs when it may list.
//
// # Cost
//
// Per step on refs: GetHead, GetEpoch at an epoch boundary, per stream one
// QueryRefs and one SwapRefs per group, and one MoveCursors: O(streams),
// independent of how many slots or records the step covers. On the pass
// index: GetHead and one MoveCursors (its merge's cursor included), plus
// per flushed stream one QueryRefs and one SettleRef: item writes follow
// flushes (bytes / FlushBytes + streams / FlushAge), not the streams a
// step settles. A step with nothing to settle, with a Clock: the state
// of its head on a chain with live runs (kept, or rebuilt once); a
// quiet flush then costs what the age flush of its streams costs, plus
// two MoveCursors. S3: the run index and one pack
// per MaxObjectBytes, one GET per slot, per step with flushes a GET of
// each live run from the oldest flushed entry that the window's cache
// does not hold (with few flushed streams instead, per stream and run not
// held, about 2 ranged GETs and 64 KiB, and one GET of each run's header
// and of each version 2 run's command table or, through its command
// index, of each stream's entry; and a rebuild of the state a GET of each one not
// cached),
// and per flush its PUTs and its GETs: one per live run holding the
// stream, but for the small pieces the step's flushed streams share a
// pack with, read before the flushes in coalesced ranged GETs, one per
// 8 MiB or less of a pack where they are at most 256 KiB apart (the
// hourly age flush at 100,000 streams: 250 GETs, was 346,028; at
// 1,000,000 the hour runs' entries stay a GET each: about 234,000 GETs a
// step of 8,192 flushes, was 680,000; docs/performance/settle.md, "Coalesced
// flush reads"); a merge reads its group's packs
// (one GET per MiB), its runs' headers and their tables by range (about
// 3 GETs per 4,096 entries a run, and a HEAD per pack), one GET to look
// for a stored first pack, and writes one pack per MaxObjectBytes and its index. Settle runs on a schedule (Handler: a scheduled event settles
// every configured chain).
package settle
