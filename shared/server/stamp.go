package server

import (
	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// A stream's timestamp policy (metastore.Timestamping) is applied by the
// star when it sequences each batch (star's stamp.go), so a config command
// (ReconfigureStream) changes it exactly from its own seq on. The server
// gives the star the stream's configuration when it opens it (configOf).

// configOf is a stream's configuration as the star applies it.
func configOf(st metastore.Stream) format.StreamConfig {
	return format.StreamConfig{RetentionMs: st.RetentionMs, TimestampMode: uint8(st.Timestamping.Mode), Uncapped: st.Timestamping.Uncapped}
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
