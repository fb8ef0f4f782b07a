package star

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// ErrTimestampRequired refuses a batch with a record without a timestamp
// on a stream whose timestamping mode is client-require. Nothing is
// written; not retriable.
var ErrTimestampRequired = errors.New("star: timestamp required")

// ErrTimestampTooFar refuses a batch with a client timestamp more than
// MaxAheadMs after its arrival on an uncapped stream. Nothing is written;
// not retriable (the same batch is refused again until the clock catches
// up).
var ErrTimestampTooFar = errors.New("star: timestamp too far in the future")

// MaxAheadMs bounds how far after its arrival an uncapped stream keeps a
// client timestamp (24 h). Retention judges a ref by its last timestamp,
// and a stream's timestamps never decrease, so an unbounded one (2^63-1)
// would keep retention from ever deleting the stream's data; bounded, a
// record is deleted at most MaxAheadMs after its retention ends (issue 31).
const MaxAheadMs = 24 * 60 * 60 * 1000

// stamp gives each of b's records its timestamp under the stream's
// configuration c at arrival time nowMs (Unix ms), in place:
// client-prefer keeps a client timestamp (not 0) and gives the others
// nowMs; client-require refuses a record without one; arrival gives every
// record nowMs; unless uncapped, a client timestamp after nowMs becomes
// nowMs (so one far-future record cannot pin every later record of the
// stream: timestamps never decrease); uncapped, a client timestamp more
// than MaxAheadMs after nowMs refuses the batch (ErrTimestampTooFar). A
// command record always gets nowMs.
// Called with l.mu held in the critical section that sequences b, so the
// configuration is the one in force at b's seqs (a config command changes
// it for the records after it). An error changes nothing.
func (b *batch) stamp(c format.StreamConfig, nowMs int64) error {
	mode := metastore.TimestampMode(c.TimestampMode)
	if b.cmd != nil {
		mode = metastore.TimestampArrival
	}
	if mode != metastore.TimestampArrival {
		for i, off := 0, 0; off < len(b.enc); i++ {
			ts := format.RecordTimestamp(b.enc[off:])
			if ts == 0 && mode == metastore.TimestampClientRequire {
				return fmt.Errorf("%w: record %d has no timestamp_ms, and the stream requires client timestamps (timestamping mode client-require); nothing written", ErrTimestampRequired, i)
			}
			if c.Uncapped && ts > nowMs && ts-nowMs > MaxAheadMs {
				return fmt.Errorf("%w: record %d has timestamp_ms %d, %d ms after its arrival at %d; an uncapped stream keeps a timestamp at most %d ms (24 h) ahead, so retention can delete it; nothing written", ErrTimestampTooFar, i, ts, ts-nowMs, nowMs, MaxAheadMs)
			}
			off += 4 + int(binary.BigEndian.Uint32(b.enc[off:]))
		}
	}
	for off := 0; off < len(b.enc); {
		ts := format.RecordTimestamp(b.enc[off:])
		switch {
		case mode == metastore.TimestampArrival, ts == 0:
			ts = nowMs
		case ts > nowMs && !c.Uncapped:
			ts = nowMs
		}
		binary.BigEndian.PutUint64(b.enc[off+4:], uint64(ts))
		off += 4 + int(binary.BigEndian.Uint32(b.enc[off:]))
	}
	return nil
}
