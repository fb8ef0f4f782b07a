package server

import (
	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// A stream's timestamp policy (metastore.Timestamping) is applied here, at
// arrival, before the batch reaches the star; the star then keeps the
// stream's timestamps non-decreasing (a record below the previous one gets
// the previous one's), which is what reads by timestamp rely on. Capping
// here (a client timestamp later than arrival becomes arrival) means one
// far-future record cannot pin every later record of the stream: without
// it, a record with timestamp_ms 2^63-1 made it the timestamp of every
// record after it, forever.

// stamp gives each record its timestamp under policy ts at arrival time
// nowMs (Unix ms): client-prefer keeps a client timestamp (not 0) and
// gives the others nowMs; client-require refuses a record without one;
// arrival gives every record nowMs; unless uncapped, a client timestamp
// after nowMs becomes nowMs. Records are changed in place; an error
// (CodeInvalidArgument) changes nothing that matters (the batch is
// refused).
func stamp(stream string, ts metastore.Timestamping, nowMs int64, recs []format.Record) error {
	for i := range recs {
		r := &recs[i]
		switch {
		case ts.Mode == metastore.TimestampArrival:
			r.TimestampMs = nowMs
		case r.TimestampMs == 0 && ts.Mode == metastore.TimestampClientRequire:
			return invalid("append to %q: record %d has no timestamp_ms, and the stream requires client timestamps (timestamping mode client-require)", stream, i)
		case r.TimestampMs == 0:
			r.TimestampMs = nowMs
		case r.TimestampMs > nowMs && !ts.Uncapped:
			r.TimestampMs = nowMs
		}
	}
	return nil
}

// timestampingOf parses a CreateStream timestamping (nil: the default).
func timestampingOf(m *strandv1.Timestamping) (metastore.Timestamping, error) {
	if m == nil {
		return metastore.Timestamping{}, nil
	}
	t := metastore.Timestamping{Uncapped: m.Uncapped}
	switch m.Mode {
	case strandv1.TimestampingMode_TIMESTAMPING_MODE_UNSPECIFIED, strandv1.TimestampingMode_TIMESTAMPING_MODE_CLIENT_PREFER:
		t.Mode = metastore.TimestampClientPrefer
	case strandv1.TimestampingMode_TIMESTAMPING_MODE_CLIENT_REQUIRE:
		t.Mode = metastore.TimestampClientRequire
	case strandv1.TimestampingMode_TIMESTAMPING_MODE_ARRIVAL:
		t.Mode = metastore.TimestampArrival
	default:
		return t, invalid("unknown timestamping mode %d (want CLIENT_PREFER, CLIENT_REQUIRE or ARRIVAL)", m.Mode)
	}
	return t, nil
}

// timestampingMsg is t as the API's message.
func timestampingMsg(t metastore.Timestamping) *strandv1.Timestamping {
	m := &strandv1.Timestamping{Mode: strandv1.TimestampingMode_TIMESTAMPING_MODE_CLIENT_PREFER, Uncapped: t.Uncapped}
	switch t.Mode {
	case metastore.TimestampClientRequire:
		m.Mode = strandv1.TimestampingMode_TIMESTAMPING_MODE_CLIENT_REQUIRE
	case metastore.TimestampArrival:
		m.Mode = strandv1.TimestampingMode_TIMESTAMPING_MODE_ARRIVAL
	}
	return m
}
