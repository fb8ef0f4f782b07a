package server

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/read"
)

// AppendArgs is a validated append request.
type AppendArgs struct {
	Stream   string
	Records  []format.Record
	MatchSeq *uint64
	// Producer and BatchSeq: an idempotent append (zero Producer: none).
	Producer format.ProducerID
	BatchSeq uint64
	// FenceToken is the fencing token the append carries ("" none).
	FenceToken string
}

// ParseAppend validates an append request: a valid stream name, 1 to 1000
// records of at most 1 MiB metered (format.ValidateBatch), header names non-empty, timestamps not
// negative. Every failure is CodeInvalidArgument with the reason. The
// records alias the request's bytes.
func ParseAppend(m *strandv1.AppendRequest) (AppendArgs, error) {
	if err := checkName(m.GetStream()); err != nil {
		return AppendArgs{}, err
	}
	a := AppendArgs{Stream: m.Stream, Records: make([]format.Record, len(m.Records))}
	for i, r := range m.Records {
		if r == nil {
			return AppendArgs{}, invalid("record %d is null", i)
		}
		if r.TimestampMs < 0 {
			return AppendArgs{}, invalid("record %d: timestamp_ms %d is negative (0 means now)", i, r.TimestampMs)
		}
		rec := format.Record{TimestampMs: r.TimestampMs, Body: r.Body}
		for j, h := range r.Headers {
			if h == nil {
				return AppendArgs{}, invalid("record %d: header %d is null", i, j)
			}
			rec.Headers = append(rec.Headers, format.Header{Name: h.Name, Value: h.Value})
		}
		a.Records[i] = rec
	}
	if _, err := format.ValidateBatch(a.Records); err != nil {
		return AppendArgs{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("append to %q: %w", m.Stream, err))
	}
	if m.MatchSeqNum != nil {
		v := *m.MatchSeqNum
		a.MatchSeq = &v
	}
	if err := parseProducer(m, &a); err != nil {
		return AppendArgs{}, err
	}
	if err := checkToken("fencing_token", m.FencingToken); err != nil {
		return AppendArgs{}, err
	}
	a.FenceToken = m.FencingToken
	return a, nil
}

// ReadArgs is a validated read request.
type ReadArgs struct {
	Stream string
	Start  read.Start
	Limits read.Limits
}

func parseStart(m interface {
	GetSeqNum() uint64
	GetTimestampMs() int64
	GetTailOffset() uint64
}, kind any) (read.Start, error) {
	switch kind.(type) {
	case nil, *strandv1.ReadRequest_SeqNum, *strandv1.ReadSessionRequest_SeqNum:
		return read.Start{Kind: read.FromSeq, Seq: m.GetSeqNum()}, nil
	case *strandv1.ReadRequest_TimestampMs, *strandv1.ReadSessionRequest_TimestampMs:
		if m.GetTimestampMs() < 0 {
			return read.Start{}, invalid("timestamp_ms %d is negative", m.GetTimestampMs())
		}
		return read.Start{Kind: read.FromTimestamp, TsMs: m.GetTimestampMs()}, nil
	case *strandv1.ReadRequest_TailOffset, *strandv1.ReadSessionRequest_TailOffset:
		return read.Start{Kind: read.FromTailOffset, TailOffset: m.GetTailOffset()}, nil
	}
	return read.Start{}, invalid("unknown start")
}

// ParseRead validates a read request: count at most 1000 and bytes at most
// 1 MiB (0 takes those defaults).
func ParseRead(m *strandv1.ReadRequest) (ReadArgs, error) {
	if err := checkName(m.GetStream()); err != nil {
		return ReadArgs{}, err
	}
	st, err := parseStart(m, m.Start)
	if err != nil {
		return ReadArgs{}, err
	}
	if m.Count > read.MaxCount {
		return ReadArgs{}, invalid("count %d is above %d", m.Count, read.MaxCount)
	}
	if m.Bytes > read.MaxBytes {
		return ReadArgs{}, invalid("bytes %d is above %d", m.Bytes, read.MaxBytes)
	}
	return ReadArgs{Stream: m.Stream, Start: st, Limits: read.Limits{Count: int(m.Count), Bytes: int(m.Bytes)}}, nil
}

// ReadSessionArgs is a validated read session request.
type ReadSessionArgs struct {
	Stream  string
	Start   read.Start
	Options read.SessionOptions
}

// ParseReadSession validates a read session request; heartbeat_ms is 100
// ms to 1 hour (0: def).
func ParseReadSession(m *strandv1.ReadSessionRequest, def time.Duration) (ReadSessionArgs, error) {
	if err := checkName(m.GetStream()); err != nil {
		return ReadSessionArgs{}, err
	}
	st, err := parseStart(m, m.Start)
	if err != nil {
		return ReadSessionArgs{}, err
	}
	hb := def
	if m.HeartbeatMs != 0 {
		if m.HeartbeatMs < 100 || m.HeartbeatMs > 3600_000 {
			return ReadSessionArgs{}, invalid("heartbeat_ms %d out of range (100 to 3600000)", m.HeartbeatMs)
		}
		hb = time.Duration(m.HeartbeatMs) * time.Millisecond
	}
	if m.Count > math.MaxInt64 || m.Bytes > math.MaxInt64 {
		return ReadSessionArgs{}, invalid("count or bytes out of range")
	}
	return ReadSessionArgs{Stream: m.Stream, Start: st, Options: read.SessionOptions{Count: m.Count, Bytes: m.Bytes, NoTail: m.NoTail, Heartbeat: hb}}, nil
}

// checkVisible refuses, in a new stream name or a token's prefix or
// description (field), characters that display as nothing or reorder the
// text around them: Unicode format characters (Cf: the bidi controls,
// zero-width characters, the byte order mark), line and paragraph
// separators, and spaces other than U+0020. A name strand ls shows, or a
// description strand token ls shows, then reads as what it is (issue 31).
// Names made before this check stay usable.
func checkVisible(field, s string) error {
	for i, r := range s {
		if unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || (unicode.Is(unicode.Zs, r) && r != ' ') {
			return invalid("%s %q: character %U at byte %d is invisible or reorders text; use visible characters", field, s, r, i)
		}
	}
	return nil
}

// CreateTokenArgs is a validated CreateToken request.
type CreateTokenArgs struct {
	Prefix      string
	Ops         []auth.Op
	Description string
	ExpiresMs   int64 // 0: never
	// Tenant: the token starts a tenant, with quotas MaxStreams and
	// AppendBytesPerSec (0: the star's; ADR 0060).
	Tenant                        bool
	MaxStreams, AppendBytesPerSec int64
}

// ParseCreateToken validates a CreateToken request: a prefix that is "" or
// a valid stream-name prefix, one or more known operations, a description of
// at most 256 bytes of UTF-8 without control characters, an expiry not
// negative (the handler refuses one in the past), quotas not negative and
// only for a token that starts a tenant. Every failure is
// CodeInvalidArgument with the reason. Scope is checked by the handler.
func ParseCreateToken(m *strandv1.CreateTokenRequest) (CreateTokenArgs, error) {
	if m.Prefix != "" {
		if err := metastore.ValidateStreamName(m.Prefix); err != nil {
			return CreateTokenArgs{}, invalid("prefix: %w", err)
		}
	}
	if err := checkVisible("prefix", m.Prefix); err != nil {
		return CreateTokenArgs{}, err
	}
	if err := checkVisible("description", m.Description); err != nil {
		return CreateTokenArgs{}, err
	}
	ops, err := auth.ParseOpList(m.Ops)
	if err != nil {
		return CreateTokenArgs{}, invalid("ops: %w", err)
	}
	if m.ExpiresMs < 0 {
		return CreateTokenArgs{}, invalid("expires_ms %d is negative (0: never expires)", m.ExpiresMs)
	}
	if !m.Tenant && (m.MaxStreams != 0 || m.AppendBytesPerSec != 0) {
		return CreateTokenArgs{}, invalid("max_streams %d and append_bytes_per_sec %d are a tenant's quotas: give them with tenant", m.MaxStreams, m.AppendBytesPerSec)
	}
	if m.MaxStreams < 0 || m.AppendBytesPerSec < 0 {
		return CreateTokenArgs{}, invalid("max_streams %d and append_bytes_per_sec %d must not be negative (0: the star's quota)", m.MaxStreams, m.AppendBytesPerSec)
	}
	t := metastore.Token{Hash: strings.Repeat("0", 64), Prefix: m.Prefix, Ops: m.Ops, Description: m.Description, ExpiresMs: m.ExpiresMs,
		StartsTenant: m.Tenant, MaxStreams: m.MaxStreams, AppendBytesPerSec: m.AppendBytesPerSec}
	if err := metastore.ValidateToken(t); err != nil {
		return CreateTokenArgs{}, invalid("%w", err)
	}
	return CreateTokenArgs{Prefix: m.Prefix, Ops: ops, Description: m.Description, ExpiresMs: m.ExpiresMs,
		Tenant: m.Tenant, MaxStreams: m.MaxStreams, AppendBytesPerSec: m.AppendBytesPerSec}, nil
}

// ParseRevokeToken validates a RevokeToken request: the hash is 64
// lowercase hex digits (the hash ListTokens and CreateToken show; not the
// secret).
func ParseRevokeToken(m *strandv1.RevokeTokenRequest) (string, error) {
	if auth.WellFormed(m.Hash) {
		return "", invalid("hash: this is a token's secret, not its hash; revoke by the hash that strand token ls shows")
	}
	if err := metastore.ValidateTokenHash(m.Hash); err != nil {
		return "", invalid("hash: %w", err)
	}
	return m.Hash, nil
}

// ParseListTokens validates a ListTokens request: a prefix that is "" or a
// valid stream-name prefix.
func ParseListTokens(m *strandv1.ListTokensRequest) (string, error) {
	if m.Prefix != "" {
		if err := metastore.ValidateStreamName(m.Prefix); err != nil {
			return "", invalid("prefix: %w", err)
		}
	}
	return m.Prefix, nil
}
