// Package probe is the garbage probe: after a fence, it removes the flight
// copies a deposed writer left at and above the cut, and it reports settled
// objects that no ref points to.
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
// # Orphan report
//
// Orphans takes the settled keys (streams/<id>/<first>-<last>) and a ref
// lookup (metastore QueryRefs) and returns the keys that no ref of their
// stream names as a settled location. It never deletes: a settled object
// written just before its ref swap looks orphaned for a moment. The sweep
// lists the settled bucket under streams/ for it: a tool path, where
// listing is allowed.
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
// orphan report if a settled bucket is configured. Fixtures for every event
// shape are in testdata/.
package probe
