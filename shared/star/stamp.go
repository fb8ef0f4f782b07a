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

// stamp gives each of b's records its timestamp under the stream's
// configuration c at arrival time nowMs (Unix ms), in place:
// client-prefer keeps a client timestamp (not 0) and gives the others
// nowMs; client-require refuses a record without one; arrival gives every
// record nowMs; unless uncapped, a client timestamp after nowMs becomes
// nowMs (so one far-future record cannot pin every later record of the
// stream: timestamps never decrease). A command record always gets nowMs.
// Called with l.mu held in the critical section that sequences b, so the
// configuration is the one in force at b's seqs (a config command changes
// it for the records after it). An error changes nothing.
func (b *batch) stamp(c format.StreamConfig, nowMs int64) error {
	mode := metastore.TimestampMode(c.TimestampMode)
	if b.cmd != nil {
		mode = metastore.TimestampArrival
	}
	if mode == metastore.TimestampClientRequire {
		for i, off := 0, 0; off < len(b.enc); i++ {
			if format.RecordTimestamp(b.enc[off:]) == 0 {
				return fmt.Errorf("%w: record %d has no timestamp_ms, and the stream requires client timestamps (timestamping mode client-require); nothing written", ErrTimestampRequired, i)
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
