// Package trim deletes what settlement no longer needs.
//
//   - Chain slots: Step deletes the slots [Trimmed, Settled) of a chain
//     (one epoch at a time, at most MaxSlotsPerStep; an epoch below the
//     settled cursor's ends at its fenced cut, absorb.Follow) from every
//     bucket of the set (up to 32 slots at once), then advances the
//     trimmed cursor by CAS. It reads
//     each copy's envelope first (one bounded GET) and deletes only a flight
//     of that very slot: poison is never deleted while the star exists (it
//     is what keeps a deposed writer out of a dead slot), and an
//     unrecognised object is kept and logged. A bucket that does not answer
//     fails the step before the cursor moves. Slots above an epoch's cut are
//     the garbage probe's, not trim's.
//   - With PassIndex off, a chain whose passes are indexed (the head's
//     Indexed cursor) is refused (absorb.ErrIndexed): trim would neither
//     delete its runs, packs and pass indexes nor wait for its window
//     before deleting a stream.
//   - Pass indexes (PassIndex, design 014): with the chain slots of a
//     step, the pass indexes of its epoch in the settled bucket that start
//     before the step's end (every one of the epoch at an epoch step): one
//     listing per step. Settle moves the settled cursor only to pass ends,
//     so these passes end at or below it and no reader's window holds
//     them; a reader that raced the delete re-reads the head.
//   - Runs and packs (PassIndex, design 014 levels 1 and 2): at every
//     step, the merged runs and then the run indexes that start below the
//     chain's flushed cursor, each with its command index if it has one
//     (every
//     record in them is behind a ref and the head no longer names them),
//     then every pack of a run that starts below it (of any plan: the
//     packs of a plan a crashed copy never adopted too): one listing of
//     the chain's runs, one of its merged runs and one of each kind of
//     packs. A level-1 run a merged run superseded stays until the flushed
//     cursor passes it (a walk from a flushed cursor inside a merged range
//     reads it). Runs go before their packs,
//     so a reader that finds a run finds its packs, and one that read a
//     run before finds a pack gone and reads its head again.
//   - Command state (ADR 0045): retention and the trim point come from the
//     stream's current command state, that of its newest durable part (the
//     pass index window's last part, passindex.Window.LastRef, or else
//     its last ref), never from the last ref alone (with the pass index a
//     stream's newest commands stay in runs until they flush: issue 30,
//     finding 1). The retention applied (Retention) is the config
//     command's, or the creation retention without one, and never shorter
//     than the metadata's (which leads the durable state while a
//     reconfigure's flight is not yet absorbed): 0 on either side keeps
//     everything.
//   - Retention: a stream with a retention > 0 loses its leading refs whose
//     LastTsMs is older than now-retention and whose locations are all
//     settled, then their settled objects. The stream's last ref (the one
//     ending at the last ref's LastSeq as read first, or a merge of it) is
//     always kept (it carries the tail and command state a takeover
//     recovers). Pages may end early (metastore.QueryPage): only an empty
//     page or a ref kept ends the walk. Before it deletes
//     any, trim raises the stream's floor (metastore RaiseFloor) to the
//     first seq it keeps, so the stream never reopens below a seq it
//     acknowledged even if every ref went. Each delete is conditional on
//     the ref being the one trim read (DeleteRefs): if settle merged an
//     expired ref with its successor in between (the merged ref is stored
//     at the expired ref's key), the delete is refused (ErrConflict,
//     counted in StreamResult.Conflicts) and the next run sees the merged
//     ref; a delete by key would have removed records still inside
//     retention (issue 13, finding 1).
//   - Explicit trim: a stream whose current command state has a trim point
//     (the Trim command's, format.StreamCommands) loses, the same way as
//     retention, its leading settled refs that end below it, and their
//     settled objects (reads already skip them: they honour the trim point
//     as soon as the command is acknowledged).
//   - Deletion (ADR 0046): a deleted stream has left its name
//     (metastore.Store.ListDeleting lists it by id; one marked deleting in
//     place by an older version is listed by name). It loses all its
//     refs, then its settled objects, then its deleting item
//     (DeleteStream), once its chain's window holds none of its parts. A
//     ref that changed since it was read is read again (at most 3 times
//     per run).
//
// Refs are deleted before the objects they point at, so no ref ever points
// at a missing object; a crash between leaves orphans for the garbage
// probe. Everything is idempotent (deletes of missing keys succeed; the
// cursor moves by CAS), so redelivery and concurrent copies are harmless.
// Time comes from an injected clock.Clock.
//
// Cost: per chain step GetHead (GetEpoch at a boundary) and one
// AdvanceCursor; per stream one ListStreams (or ListDeleting) share, one
// window lookup for its command state (with PassIndex: a GetHead and the
// cached window; else its LastRef), and a LastRef and a QueryRefs when it
// has a retention or a trim point; DeleteRefs only when something
// expires. Trim runs on a schedule (Handler).
package trim
