// Package passindex is the read model of the pass index (design 014): the
// window of a chain's index objects that absorb and settle write in the
// settled bucket (the passes of [settled, checkpoint), the level-1 runs of
// [flushed, settled), the merged runs below the head's Merged cursor), read
// back as refs. It writes nothing: absorb writes the passes
// (absorb.BuildPassIndex), settle the runs, merged runs and command
// indexes; the object formats are package format's (format.PassIndex).
//
// Everything that reads a stream's records or state from the window goes
// through Window: settle (its steps' runs, merges and flushes), trim (the
// retention and deletion checks), the probe (what the window still
// names), reads and tail recovery (read.Reader.Transit,
// server.Config.Window, the star's successor), and absorb itself (where a
// chain's indexed passes begin, IndexedFrom). It sits below those stages
// and imports none of them (ADR 0058).
//
// # The window
//
// Window reads the window back: the runs of [flushed, settled) that
// settle wrote (design 014 level 1: a stream's packed entries, as refs
// with settled locations in packs, after its last marker: a marker's seqs
// are behind a ref; below the head's Merged cursor, the merged run at a
// slot when there is one, level 2, else the level-1 run), then the passes of [settled, checkpoint) (as refs
// with transit locations); runs and passes found by key (each names its
// end, where the next starts; an epoch below the cursor's ends at its
// cut), cached decoded (a cold cache loads by LIST and parallel GETs when
// Parallel is set), and searched by seq or by timestamp (a binary search
// per run and pass). The cache is bounded in bytes (Window.MaxBytes,
// default DefaultWindowCacheBytes; windowcache.go): each object counted
// at DecodedBytes (within a factor of 1.5 of its heap,
// TestDecodedBytesEstimate), the least recently used evicted past the
// budget, an object that needed an eviction entering at the cold end (so
// a walk over a window larger than the budget keeps a budget's worth,
// TestWindowCacheBudget), an object larger than the budget used and not
// cached. An evicted object is fetched again by GET on its next use, under
// the same not-found rules as a first fetch (ErrWindow matching
// objstore.ErrNotFound: trim deleted it, re-read the head). Per-stream
// lookups (HeadRefs and what calls it: StreamRefs, QueryRefs, LastRef,
// RefsBefore (a page of parts and refs, newest first, for RecoverStream),
// ForStream, ChainsLookup; HeadParts, HeadLastRef, StreamParts: trim's
// deletion check) visit the window one
// object at a time, so their peak is the budget plus one object, and
// never evict: an object not cached is fetched whole only when it fits
// beside what is cached (and a 1/64 reserve for headers); else it is read
// by range (ranged.go; design 014, "Lookups past the window budget"):
// its header (cached alone, with a sparse directory of the stream table
// entries read so far), one or two blocks of its stream table found by
// an interpolation search on the id (bisecting when a guess misses), then
// exactly the stream's segments and marks, and command state only for a
// lookup that needs it (through a run's command index, a sidecar settle
// writes beside a run with a large command table: a block of it and the
// stream's entry, bound to the run by its CRC and size, refused and the
// table read whole when absent, of another run or corrupt; cmdindex.go,
// design 014 "The command index"; else the whole command table) (HeadRefs, StreamRefs: every
// part's; LastRef, HeadLastRef: the last part's object's alone; QueryRefs,
// HeadParts, StreamParts and ChainsLookup return none), up to
// RangedParallel objects at a time (TestWindowLookupPastBudget,
// TestFindRangedEqualsFindAll). StreamRuns (settle's flush of few
// streams) is such a lookup of several streams in the live runs: it
// reads a header before fetching an object of unknown size whole, and
// each version 2 object's command state once for all of them (their
// entries through its command index, or its table), after
// their ranged reads (every entry with its state, as a whole decode
// gives it). Bulk walks (VisitPasses, VisitHeadRuns,
// HeadRuns, Passes: settle, takeover) read whole objects whatever the
// budget; settle's steps hold the live runs they walk (HeadRuns)
// whatever the budget. Settle, trim, the probe, reads and tail recovery
// switch with it (settle.Settler.PassIndex, trim.Trimmer.PassIndex,
// probe.Handler.PassIndex, read.Reader.Transit, server.Config.Window).
//
// # Where the window starts
//
// The window starts at the head's Indexed cursor (design 014, "Switching
// a live chain": absorb sets it). Window walks runs and passes only from
// the cursor (WindowFrom: a flushed cursor behind it is read as it). A
// head without it whose window starts with an index (a chain indexed
// before the cursor existed) is indexed from its window's start
// (IndexedFrom, one GET per window start, cached; absorb indexes such a
// chain's passes by the same answer); absorb records the cursor once the
// window is empty.
//
// # Epochs
//
// A window that crosses an epoch reads the cut of each epoch below its
// end (EpochCut, which absorb and settle also use to follow a cursor
// across an epoch): the epoch must be fenced (ErrUnfenced otherwise).
package passindex
