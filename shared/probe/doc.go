// Package probe is the garbage probe: after a fence, it removes the flight
// copies a deposed writer left at and above the cut, and it reports settled
// objects that no ref points to and deletes them once provably
// unreferenced for a grace period.
//
// # Why there is garbage
//
// A writer keeps up to the minted pipeline window of slots assigned and
// unreleased, so when its epoch is fenced at cut, flights may sit in slots
// cut .. cut+window-1 (some even at W copies: committed in the buckets but
// never acknowledged; the cut, not the ack ledger, decides that they belong
// to no epoch). A flight copy at the cut slot itself (which is dead) is
// garbage too. Nothing else points at these keys.
//
// # Probe (one fenced epoch)
//
// Before it deletes anything, Probe checks, and refuses with an error on
// any mismatch (nothing deleted):
//
//   - the epoch record (metastore GetEpoch) is EpochFenced (ErrNotFenced)
//     and its Cut is the event's (ErrCutMismatch): a wrong, low cut would
//     point below committed slots;
//   - the record's bucket names are the handler's set for the chain
//     (ErrSetMismatch); the record's W is used;
//   - the cut slot is Dead in the buckets (chain.Classify over one
//     envelope read per bucket) (ErrCutNotDead).
//
// Then, for every slot in [cut, cut+window) with the minted window, in
// every bucket: read the envelope (one bounded GET); a flight of this epoch
// and slot written by the epoch's writer (the record's nonce) is deleted;
// poison is never deleted (it stays until the star is decommissioned);
// junk, and a flight with another nonce, are kept and reported. A failing
// bucket does not stop the pass; the errors come back together, and the
// rerun (redelivery, the next sweep) finishes the job. Probe is idempotent.
//
// A concurrent fencer never writes above the cut (every fencer computes the
// same cut and stops there), so only the cut slot can see a late poison;
// deleting a flight read there cannot remove a poison the slot needs, since
// the slot was already dead.
//
// # Orphans
//
// Orphans takes the settled keys (streams/<id>/<first>-<last>) and a ref
// lookup (metastore QueryRefs) and returns the keys that no ref of their
// stream names as a settled location; it only reads. They come from a
// merge whose superseded object was not deleted (a crash after the swap),
// a settle copy whose swap lost, and trim crashing between a stream's
// refs and its objects. The sweep lists the settled bucket under streams/
// for it (a tool path, where listing is allowed) and then collects them:
//
//   - An orphan is deletable when, besides no ref naming it, no ref of its
//     stream that overlaps its seq range is in transit. Only settle swaps
//     a ref to a settled object, only from transit refs of that range, and
//     its swap is conditional on those refs being unchanged; so once none
//     is in transit, no ref can ever point at the object again, even from
//     a settle copy that read the refs long ago. An orphan that overlaps a
//     transit ref may be an object a settle step just wrote and is about
//     to swap in: it is kept (and reported).
//   - Grace: a deletable orphan is marked (an object under MarkPrefix,
//     probe/orphans/<key>, holding when it was first found deletable, by
//     the injected clock) and deleted by the first sweep that finds it
//     still deletable OrphanGrace (default 24h) later; the marker goes with
//     it. A marker whose object is no longer a deletable orphan is deleted,
//     so the grace starts over. OrphanGrace < 0 only reports
//     (STRAND_PROBE_ORPHAN_GRACE=off).
//
// Before issue 13 (finding 10) orphans were only reported, and storage
// leaked.
//
// # Handler (the Lambda)
//
// Handler.Handle takes the raw event and dispatches on its shape:
//
//   - an SQS batch ("Records"): each body is a fence event (or an
//     EventBridge event carrying one as detail); failed messages, malformed
//     ones included, are returned in events.SQSEventResponse
//     BatchItemFailures, and the batch itself never fails;
//   - an EventBridge event ("detail-type"): "Scheduled Event" runs Sweep;
//     any other detail-type carries a fence event as its detail;
//   - a bare fence event (direct invocation):
//     {"star":"star-0","class":"express","epoch":3,"cut":17,"window":32}.
//
// Sweep: for every chain in Sets, read its head (GetHead; never minted:
// skipped) and the epochs below the current one, at most SweepEpochs epoch
// numbers down (GetEpoch; numbers never minted are skipped, unfenced ones
// logged and skipped), and probe each fenced epoch above its Cut; then the
// orphans (report, marks, deletes) if a settled bucket is configured. Fixtures for every event
// shape are in testdata/.
package probe
