package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
)

// Header is one record header.
type Header struct {
	Name, Value []byte
}

// Record is a record to append (Seq is ignored) or a record read.
type Record struct {
	Seq         uint64
	TimestampMs int64 // 0 on append: the server's time
	Headers     []Header
	Body        []byte
}

// Stream describes a stream.
type Stream struct {
	Name        string
	ID          string
	Class       string // "standard" or "express"
	Leader      string
	CreatedMs   int64
	RetentionMs int64
	Deleting    bool
	// Timestamping is the stream's timestamp mode ("client-prefer",
	// "client-require" or "arrival"); Uncapped, whether client timestamps
	// later than arrival are kept.
	Timestamping string
	Uncapped     bool
}

// Tail is a stream's tail: the next seq and the last record's timestamp.
type Tail struct {
	NextSeq  uint64
	LastTsMs int64
}

// Ack acknowledges one appended batch: its seqs [StartSeq, EndSeq) and the
// tail after it.
type Ack struct {
	StartSeq, EndSeq uint64
	Tail
}

// Client talks to a strand server. It is safe for concurrent use.
type Client struct {
	eps     endpoints
	scheme  string   // the endpoint's
	trusted []string // host names a leader may be at (the endpoint's first)
	token   string
	http    *http.Client

	retry   Retry
	noIdem  bool
	prods   producers
	reached atomic.Bool // some call got an answer from a server (retrying)

	mu      sync.Mutex
	clients map[string]strandv1connect.StrandServiceClient
	leaders map[string]string // stream name -> base URL of its leader
}

// Option configures a Client.
type Option func(*Client)

// WithToken sets the bearer token sent with every call.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithTrustedLeaders adds host names (without ports) that a stream's
// leader may be at, besides the endpoint's own host; "*.example.com"
// trusts every subdomain of example.com. The client follows a Leader
// detail only to a trusted host, so its token goes nowhere else.
func WithTrustedLeaders(hosts ...string) Option {
	return func(c *Client) {
		for _, h := range hosts {
			c.trusted = append(c.trusted, strings.ToLower(h))
		}
	}
}

// WithHTTPClient replaces the HTTP client (it must speak HTTP/2 for the
// sessions).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// NewHTTPClient returns an HTTP client that speaks HTTP/2 with and without
// TLS (h2c for http:// URLs).
func NewHTTPClient() *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, ForceAttemptHTTP2: true, Proxy: http.ProxyFromEnvironment}}
}

// New returns a client of the server at endpoint (http://host:port or
// https://host:port), or of whichever of a comma-separated list of them
// serves (a leader and its standbys, of one scheme: endpoints.go).
func New(endpoint string, opts ...Option) (*Client, error) {
	list, err := parseEndpoints(endpoint)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(list[0])
	c := &Client{eps: endpoints{list: list}, scheme: u.Scheme,
		clients: map[string]strandv1connect.StrandServiceClient{}, leaders: map[string]string{}}
	for _, b := range list {
		v, _ := url.Parse(b)
		if v.Scheme != c.scheme {
			return nil, fmt.Errorf("client: endpoints %q mix http and https", endpoint)
		}
		c.trusted = append(c.trusted, strings.ToLower(v.Hostname()))
	}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = NewHTTPClient()
	}
	return c, nil
}

var errNoEndpoint = errors.New("client: no endpoint: give --endpoint or set STRAND_ENDPOINT (strand dev prints it)")

func normalize(endpoint string) (string, error) {
	if endpoint == "" {
		return "", errNoEndpoint
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("client: endpoint %q: want http://host:port or https://host:port", endpoint)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Endpoint is the base URL of the endpoint the client calls now (the one
// it was made with, or of its list the one it moved to).
func (c *Client) Endpoint() string { return c.eps.home() }

func (c *Client) api(base string) strandv1connect.StrandServiceClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.clients[base]; a != nil {
		return a
	}
	// Every unary answer tells retrying that the server was reached (the
	// sessions open after a CheckTail).
	observer := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			c.observe(err)
			return res, err
		}
	})
	a := strandv1connect.NewStrandServiceClient(c.http, base, connect.WithInterceptors(tokenInterceptor(c.token), failoverIntc{&c.eps, base}, observer),
		connect.WithReadMaxBytes(MaxResponseBytes))
	c.clients[base] = a
	return a
}

func (c *Client) baseFor(stream string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.leaders[stream]; ok {
		return b
	}
	return c.eps.home()
}

// maxHops bounds how many leader redirects one call follows.
const maxHops = 3

// MaxResponseBytes bounds one response message the client reads (the
// largest legal one, a read of 1 MiB of records, is about 1.1 MiB); a
// larger one fails with ResourceExhausted instead of exhausting memory.
const MaxResponseBytes = 4 << 20

// ErrUntrustedLeader: a Leader detail named a host the client does not
// trust, or a downgrade from https to http; it was not followed.
var ErrUntrustedLeader = errors.New("client: leader not trusted")

// leaderBase validates a leader URL from a Leader detail: a URL on a
// trusted host (the endpoint's, or WithTrustedLeaders) with the endpoint's
// scheme, never https to http.
func (c *Client) leaderBase(raw string) (string, error) {
	base, err := normalize(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUntrustedLeader, err)
	}
	u, _ := url.Parse(base)
	if c.scheme == "https" && u.Scheme != "https" {
		return "", fmt.Errorf("%w: %s would downgrade the endpoint's https to %s", ErrUntrustedLeader, base, u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	for _, t := range c.trusted {
		if host == t || (strings.HasPrefix(t, "*.") && strings.HasSuffix(host, t[1:])) {
			return base, nil
		}
	}
	return "", fmt.Errorf("%w: host %q is not trusted (the endpoint's host is; add others with WithTrustedLeaders or --trust-leader)", ErrUntrustedLeader, u.Hostname())
}

// forget drops the stream's cached leader.
func (c *Client) forget(stream string) {
	c.mu.Lock()
	delete(c.leaders, stream)
	c.mu.Unlock()
}

// leaderFailed reports whether err says the star called is not (or no
// longer) a working leader, rather than answering for the stream.
func leaderFailed(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeInternal, connect.CodeUnimplemented:
		return true
	}
	return false
}

// withLeader runs call against the stream's leader, following Leader
// details to trusted hosts (leaderBase). A cached leader that fails is
// forgotten: the next call starts at the endpoint.
func withLeader[T any](c *Client, stream string, call func(strandv1connect.StrandServiceClient) (T, error)) (T, error) {
	base := c.baseFor(stream)
	for hop := 0; ; hop++ {
		res, err := call(c.api(base))
		if err == nil {
			return res, nil
		}
		if leaderFailed(err) {
			c.forget(stream)
		}
		if hop >= maxHops {
			return res, err
		}
		l, ok := LeaderOf(err)
		if !ok || l.URL == "" {
			return res, err
		}
		next, nerr := c.leaderBase(l.URL)
		if nerr != nil {
			return res, fmt.Errorf("%w (%w)", err, nerr)
		}
		if next == base {
			return res, err
		}
		base = next
		c.mu.Lock()
		c.leaders[stream] = base
		c.mu.Unlock()
	}
}

// Leader is where a stream's leader is.
type Leader struct {
	Star string
	URL  string
}

// LeaderOf returns the Leader detail of an error from a star that does not
// lead the stream.
func LeaderOf(err error) (Leader, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return Leader{}, false
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if l, ok := v.(*strandv1.Leader); ok {
				return Leader{Star: l.Star, URL: l.Url}, true
			}
		}
	}
	return Leader{}, false
}

// SeqMismatch returns the stream's tail carried by a match_seq_num miss.
func SeqMismatch(err error) (Tail, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		return Tail{}, false
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if t, ok := v.(*strandv1.Tail); ok {
				return Tail{NextSeq: t.NextSeqNum, LastTsMs: t.LastTimestampMs}, true
			}
		}
	}
	return Tail{}, false
}

func tokenInterceptor(token string) connect.Interceptor {
	return tokenIntc{token}
}

type tokenIntc struct{ token string }

func (t tokenIntc) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if t.token != "" {
			req.Header().Set("Authorization", "Bearer "+t.token)
		}
		return next(ctx, req)
	}
}

func (t tokenIntc) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if t.token != "" {
			conn.RequestHeader().Set("Authorization", "Bearer "+t.token)
		}
		return conn
	}
}

func (t tokenIntc) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func streamOf(m *strandv1.Stream) Stream {
	if m == nil {
		return Stream{}
	}
	class := "standard"
	if m.StorageClass == strandv1.StorageClass_STORAGE_CLASS_EXPRESS {
		class = "express"
	}
	s := Stream{Name: m.Name, ID: m.Id, Class: class, Leader: m.Leader, CreatedMs: m.CreatedMs, RetentionMs: m.RetentionMs, Deleting: m.Deleting,
		Timestamping: "client-prefer"}
	if ts := m.Timestamping; ts != nil {
		for name, mode := range timestampingModes {
			if mode == ts.Mode && name != "" {
				s.Timestamping = name
			}
		}
		s.Uncapped = ts.Uncapped
	}
	return s
}

// timestampingModes maps CreateOptions.Timestamping to the API's modes.
var timestampingModes = map[string]strandv1.TimestampingMode{
	"":               strandv1.TimestampingMode_TIMESTAMPING_MODE_UNSPECIFIED,
	"client-prefer":  strandv1.TimestampingMode_TIMESTAMPING_MODE_CLIENT_PREFER,
	"client-require": strandv1.TimestampingMode_TIMESTAMPING_MODE_CLIENT_REQUIRE,
	"arrival":        strandv1.TimestampingMode_TIMESTAMPING_MODE_ARRIVAL,
}

// CreateOptions qualify a new stream.
type CreateOptions struct {
	// Class is "standard" (default) or "express".
	Class string
	// RetentionMs: settled data older than this is trimmed (0: forever).
	RetentionMs int64
	// Timestamping is "client-prefer" (default), "client-require" or
	// "arrival"; Uncapped keeps client timestamps later than arrival.
	Timestamping string
	Uncapped     bool
}

// CreateStream creates a stream.
func (c *Client) CreateStream(ctx context.Context, name string, opt CreateOptions) (Stream, error) {
	req := &strandv1.CreateStreamRequest{Name: name, RetentionMs: opt.RetentionMs}
	switch strings.ToLower(opt.Class) {
	case "", "standard":
		req.StorageClass = strandv1.StorageClass_STORAGE_CLASS_STANDARD
	case "express":
		req.StorageClass = strandv1.StorageClass_STORAGE_CLASS_EXPRESS
	default:
		return Stream{}, fmt.Errorf("client: class %q: want standard or express", opt.Class)
	}
	mode, ok := timestampingModes[strings.ToLower(opt.Timestamping)]
	if !ok {
		return Stream{}, fmt.Errorf("client: timestamping %q: want client-prefer, client-require or arrival", opt.Timestamping)
	}
	if mode != strandv1.TimestampingMode_TIMESTAMPING_MODE_UNSPECIFIED || opt.Uncapped {
		req.Timestamping = &strandv1.Timestamping{Mode: mode, Uncapped: opt.Uncapped}
	}
	// Not idempotent: a retry after a lost answer would be AlreadyExists.
	res, err := retrying(ctx, c, false, func() (*connect.Response[strandv1.CreateStreamResponse], error) {
		return c.api(c.eps.home()).CreateStream(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return Stream{}, err
	}
	return streamOf(res.Msg.Stream), nil
}

// DeleteStream deletes a stream (at its leader). While another
// DeleteStream of the stream is draining it the server answers
// FailedPrecondition ("server: delete in progress"; not Retriable): this
// call deleted nothing, the other one deletes the stream or fails. See
// docs/api.md, "Errors".
func (c *Client) DeleteStream(ctx context.Context, name string) error {
	_, err := withLeader(c, name, func(a strandv1connect.StrandServiceClient) (*connect.Response[strandv1.DeleteStreamResponse], error) {
		return a.DeleteStream(ctx, connect.NewRequest(&strandv1.DeleteStreamRequest{Name: name}))
	})
	return err
}

// ListStreams lists one page of streams whose names start with prefix,
// after startAfter; next is "" on the last page.
func (c *Client) ListStreams(ctx context.Context, prefix, startAfter string, limit int) (streams []Stream, next string, err error) {
	res, err := retrying(ctx, c, true, func() (*connect.Response[strandv1.ListStreamsResponse], error) {
		return c.api(c.eps.home()).ListStreams(ctx, connect.NewRequest(&strandv1.ListStreamsRequest{Prefix: prefix, StartAfter: startAfter, Limit: int32(limit)}))
	})
	if err != nil {
		return nil, "", err
	}
	for _, m := range res.Msg.Streams {
		streams = append(streams, streamOf(m))
	}
	return streams, res.Msg.NextStartAfter, nil
}

// GetStream describes a stream.
func (c *Client) GetStream(ctx context.Context, name string) (Stream, error) {
	res, err := retrying(ctx, c, true, func() (*connect.Response[strandv1.GetStreamResponse], error) {
		return c.api(c.eps.home()).GetStream(ctx, connect.NewRequest(&strandv1.GetStreamRequest{Name: name}))
	})
	if err != nil {
		return Stream{}, err
	}
	return streamOf(res.Msg.Stream), nil
}

// CheckTail returns the stream's tail.
func (c *Client) CheckTail(ctx context.Context, name string) (Tail, error) {
	st, err := c.State(ctx, name)
	return st.Tail, err
}

// State is a stream's state at its leader, as of its acknowledged tail.
type State struct {
	Tail
	// TrimSeq is the trim point (0: never trimmed): reads start at it or
	// above.
	TrimSeq uint64
	// Fenced: appends must carry the stream's fencing token (which the
	// API never reveals).
	Fenced bool
}

// State returns the stream's tail, trim point and fence state (one
// CheckTail call).
func (c *Client) State(ctx context.Context, name string) (State, error) {
	res, err := retrying(ctx, c, true, func() (*connect.Response[strandv1.CheckTailResponse], error) {
		return withLeader(c, name, func(a strandv1connect.StrandServiceClient) (*connect.Response[strandv1.CheckTailResponse], error) {
			return a.CheckTail(ctx, connect.NewRequest(&strandv1.CheckTailRequest{Stream: name}))
		})
	})
	if err != nil {
		return State{}, err
	}
	m := res.Msg
	return State{Tail: Tail{NextSeq: m.NextSeqNum, LastTsMs: m.LastTimestampMs}, TrimSeq: m.TrimSeqNum, Fenced: m.Fenced}, nil
}

// AppendOptions qualify an append.
type AppendOptions struct {
	// MatchSeq, if set, must equal the stream's tail or the batch is
	// rejected (see SeqMismatch).
	MatchSeq *uint64
	// Producer and BatchSeq make the append idempotent under a producer
	// the caller manages (resume it across processes): BatchSeq is the
	// producer's batch sequence on this stream, one more per batch. Unset,
	// the client uses its own random producers (unless
	// WithoutIdempotence), so its retries never duplicate a batch.
	Producer *ProducerID
	BatchSeq uint64
	// FenceToken must be the stream's current fencing token (see Fence);
	// "" for a stream that is not fenced. A mismatch is refused with
	// FailedPrecondition (not retriable) and nothing is written.
	FenceToken string
}

func appendReq(name string, recs []Record, opt AppendOptions) *strandv1.AppendRequest {
	req := &strandv1.AppendRequest{Stream: name, MatchSeqNum: opt.MatchSeq, Records: make([]*strandv1.AppendRecord, len(recs)), FencingToken: opt.FenceToken}
	if opt.Producer != nil {
		seq := opt.BatchSeq
		req.ProducerId, req.BatchSeq = opt.Producer[:], &seq
	}
	for i, r := range recs {
		m := &strandv1.AppendRecord{TimestampMs: r.TimestampMs, Body: r.Body}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, &strandv1.Header{Name: h.Name, Value: h.Value})
		}
		req.Records[i] = m
	}
	return req
}

func ackOf(m *strandv1.AppendResponse) Ack {
	return Ack{StartSeq: m.StartSeqNum, EndSeq: m.EndSeqNum, Tail: Tail{NextSeq: m.NextSeqNum, LastTsMs: m.LastTimestampMs}}
}

// Append appends one batch (1 to 1000 records, at most 1 MiB) and returns
// once it is durable. It is exactly once by default: the batch carries a
// producer id and batch seq (the client's own, or opt's), and retriable
// errors are retried with backoff within the client's Retry budget; a
// retry of a batch already committed gets the original ack.
func (c *Client) Append(ctx context.Context, name string, recs []Record, opt AppendOptions) (Ack, error) {
	var pr *producer
	if opt.Producer == nil && !c.noIdem {
		pr = c.prods.take()
		opt.Producer, opt.BatchSeq = &pr.id, pr.next[name]
	}
	req := appendReq(name, recs, opt)
	res, err := retrying(ctx, c, opt.Producer != nil, func() (*connect.Response[strandv1.AppendResponse], error) {
		return withLeader(c, name, func(a strandv1connect.StrandServiceClient) (*connect.Response[strandv1.AppendResponse], error) {
			return a.Append(ctx, connect.NewRequest(req))
		})
	})
	if err != nil {
		return Ack{}, err // pr is dropped: its last batch's outcome may be unknown
	}
	if pr != nil {
		pr.next[name]++
		c.prods.give(pr)
	}
	return ackOf(res.Msg), nil
}

// Start is where a read begins: FromSeq, FromTimestamp or FromTail.
type Start struct {
	kind int
	v    uint64
}

// FromSeq starts at seq.
func FromSeq(seq uint64) Start { return Start{0, seq} }

// FromTimestamp starts at the first record with timestamp >= ms.
func FromTimestamp(ms int64) Start { return Start{1, uint64(ms)} }

// FromTail starts n records before the tail.
func FromTail(n uint64) Start { return Start{2, n} }

// Limits bound a read (0: the server's defaults, 1000 records and 1 MiB).
type Limits struct {
	Count int
	Bytes int
}

// ReadResult is a read's records and the stream's tail.
type ReadResult struct {
	Records []Record
	Tail
}

func recordsOf(ms []*strandv1.SequencedRecord) []Record {
	out := make([]Record, len(ms))
	for i, m := range ms {
		r := Record{Seq: m.SeqNum, TimestampMs: m.TimestampMs, Body: m.Body}
		for _, h := range m.Headers {
			r.Headers = append(r.Headers, Header{Name: h.Name, Value: h.Value})
		}
		out[i] = r
	}
	return out
}

// Read reads up to lim records from start. A start past the tail reads
// nothing and returns the tail.
func (c *Client) Read(ctx context.Context, name string, start Start, lim Limits) (ReadResult, error) {
	req := &strandv1.ReadRequest{Stream: name, Count: uint32(max(lim.Count, 0)), Bytes: uint64(max(lim.Bytes, 0))}
	switch start.kind {
	case 0:
		req.Start = &strandv1.ReadRequest_SeqNum{SeqNum: start.v}
	case 1:
		req.Start = &strandv1.ReadRequest_TimestampMs{TimestampMs: int64(start.v)}
	case 2:
		req.Start = &strandv1.ReadRequest_TailOffset{TailOffset: start.v}
	}
	res, err := retrying(ctx, c, true, func() (*connect.Response[strandv1.ReadResponse], error) {
		return withLeader(c, name, func(a strandv1connect.StrandServiceClient) (*connect.Response[strandv1.ReadResponse], error) {
			return a.Read(ctx, connect.NewRequest(req))
		})
	})
	if err != nil {
		return ReadResult{}, err
	}
	return ReadResult{Records: recordsOf(res.Msg.Records), Tail: Tail{NextSeq: res.Msg.NextSeqNum, LastTsMs: res.Msg.LastTimestampMs}}, nil
}

// TokenInfo describes an issued token (never its secret).
type TokenInfo struct {
	Hash        string   `json:"hash"` // the token's id: SHA-256 of the secret, hex
	Prefix      string   `json:"prefix"`
	Ops         []string `json:"ops"`
	Description string   `json:"description,omitempty"`
	ExpiresMs   int64    `json:"expiresMs,omitempty"` // 0: never expires
	// Tenant: the token starts a tenant, with these quotas (0: the star's).
	Tenant            bool  `json:"tenant,omitempty"`
	MaxStreams        int64 `json:"maxStreams,omitempty"`
	AppendBytesPerSec int64 `json:"appendBytesPerSec,omitempty"`
}

func tokenInfoOf(m *strandv1.TokenInfo) TokenInfo {
	if m == nil {
		return TokenInfo{}
	}
	return TokenInfo{Hash: m.Hash, Prefix: m.Prefix, Ops: m.Ops, Description: m.Description, ExpiresMs: m.ExpiresMs,
		Tenant: m.Tenant, MaxStreams: m.MaxStreams, AppendBytesPerSec: m.AppendBytesPerSec}
}

// TokenSpec is the grant of a token to create.
type TokenSpec struct {
	// Prefix scopes the token to streams whose names start with it ("":
	// every stream); it must be within the calling token's prefix.
	Prefix string
	// Ops: one or more of "read", "append", "trim", "fence", "admin".
	Ops         []string
	Description string
	// ExpiresMs: the token is refused from this time on (Unix ms, in the
	// future); 0: never.
	ExpiresMs int64
	// Tenant: the token starts a tenant of its own (it and the tokens
	// minted under it share the per-tenant limits and quotas, apart from
	// the caller's); only an admin for every stream outside any started
	// tenant may ask. MaxStreams and AppendBytesPerSec are its quotas (0:
	// the star's), only with Tenant.
	Tenant            bool
	MaxStreams        int64
	AppendBytesPerSec int64
}

// CreateToken issues a token (the caller needs admin over spec.Prefix) and
// returns its secret, shown only this once, and its info.
func (c *Client) CreateToken(ctx context.Context, spec TokenSpec) (secret string, info TokenInfo, err error) {
	req := &strandv1.CreateTokenRequest{Prefix: spec.Prefix, Ops: spec.Ops, Description: spec.Description, ExpiresMs: spec.ExpiresMs,
		Tenant: spec.Tenant, MaxStreams: spec.MaxStreams, AppendBytesPerSec: spec.AppendBytesPerSec}
	// Not idempotent: a retry after a lost answer would mint a second token.
	res, err := retrying(ctx, c, false, func() (*connect.Response[strandv1.CreateTokenResponse], error) {
		return c.api(c.eps.home()).CreateToken(ctx, connect.NewRequest(req))
	})
	if err != nil {
		return "", TokenInfo{}, err
	}
	return res.Msg.Token, tokenInfoOf(res.Msg.Info), nil
}

// RevokeToken revokes the token with this hash (TokenInfo.Hash). Servers
// that cached its grant may accept it for up to 10 s more.
func (c *Client) RevokeToken(ctx context.Context, hash string) error {
	_, err := retrying(ctx, c, false, func() (*connect.Response[strandv1.RevokeTokenResponse], error) {
		return c.api(c.eps.home()).RevokeToken(ctx, connect.NewRequest(&strandv1.RevokeTokenRequest{Hash: hash}))
	})
	return err
}

// ListTokens lists the tokens whose prefix starts with prefix, within the
// calling token's prefix, in hash order.
func (c *Client) ListTokens(ctx context.Context, prefix string) ([]TokenInfo, error) {
	res, err := retrying(ctx, c, true, func() (*connect.Response[strandv1.ListTokensResponse], error) {
		return c.api(c.eps.home()).ListTokens(ctx, connect.NewRequest(&strandv1.ListTokensRequest{Prefix: prefix}))
	})
	if err != nil {
		return nil, err
	}
	out := make([]TokenInfo, 0, len(res.Msg.Tokens))
	for _, m := range res.Msg.Tokens {
		out = append(out, tokenInfoOf(m))
	}
	return out, nil
}

// FenceOptions qualify a Fence.
type FenceOptions struct {
	// CurrentToken, if set, must be the stream's current fencing token (""
	// for not fenced), or the fence is refused with FailedPrecondition.
	CurrentToken *string
	// MatchSeq, if set, must equal the stream's tail.
	MatchSeq *uint64
}

// Fence fences a stream to token ("" unfences it): a command record
// sequenced with the appends. Every append sequenced after it must carry
// token (AppendOptions.FenceToken), so a deposed writer can never append
// after the fence. It returns the fence record's seq. Retried like an
// idempotent append unless CurrentToken or MatchSeq is set (a retry of a
// fence that took effect would then be refused).
func (c *Client) Fence(ctx context.Context, name, token string, opt FenceOptions) (uint64, error) {
	req := &strandv1.FenceRequest{Stream: name, Token: token, CurrentToken: opt.CurrentToken, MatchSeqNum: opt.MatchSeq}
	res, err := retrying(ctx, c, opt.CurrentToken == nil && opt.MatchSeq == nil, func() (*connect.Response[strandv1.FenceResponse], error) {
		return withLeader(c, name, func(a strandv1connect.StrandServiceClient) (*connect.Response[strandv1.FenceResponse], error) {
			return a.Fence(ctx, connect.NewRequest(req))
		})
	})
	if err != nil {
		return 0, err
	}
	return res.Msg.SeqNum, nil
}

// TrimOptions qualify a Trim.
type TrimOptions struct {
	// FenceToken: as for an append (a fenced stream's trim must carry it).
	FenceToken string
	// MatchSeq, if set, must equal the stream's tail.
	MatchSeq *uint64
}

// Trimmed is a trim's outcome: the trim record's seq and the stream's trim
// point after it.
type Trimmed struct {
	Seq     uint64
	TrimSeq uint64
}

// Trim trims a stream below seq: a command record sequenced with the
// appends. Reads never return a record below the trim point once Trim
// returns (a read that starts below it starts at it); the records are
// removed from storage later. Retried like an idempotent append unless
// MatchSeq is set.
func (c *Client) Trim(ctx context.Context, name string, seq uint64, opt TrimOptions) (Trimmed, error) {
	req := &strandv1.TrimRequest{Stream: name, TrimSeqNum: seq, FencingToken: opt.FenceToken, MatchSeqNum: opt.MatchSeq}
	res, err := retrying(ctx, c, opt.MatchSeq == nil, func() (*connect.Response[strandv1.TrimResponse], error) {
		return withLeader(c, name, func(a strandv1connect.StrandServiceClient) (*connect.Response[strandv1.TrimResponse], error) {
			return a.Trim(ctx, connect.NewRequest(req))
		})
	})
	if err != nil {
		return Trimmed{}, err
	}
	return Trimmed{Seq: res.Msg.SeqNum, TrimSeq: res.Msg.TrimSeqNum}, nil
}

// ReconfigureOptions is a change to a stream's configuration: the fields
// set replace the stream's, the others are kept.
type ReconfigureOptions struct {
	RetentionMs *int64
	// Timestamping: client-prefer, client-require or arrival ("": keep).
	Timestamping string
	Uncapped     *bool
}

// ReconfigureStream changes a stream's retention and timestamping (admin):
// a config command record sequenced with the appends. It returns the
// stream with its new configuration and the seq of the command record:
// the records after it are judged by the new configuration.
func (c *Client) ReconfigureStream(ctx context.Context, name string, opt ReconfigureOptions) (Stream, uint64, error) {
	req := &strandv1.ReconfigureStreamRequest{Name: name, RetentionMs: opt.RetentionMs, Uncapped: opt.Uncapped}
	if opt.Timestamping != "" {
		mode, ok := timestampingModes[strings.ToLower(opt.Timestamping)]
		if !ok {
			return Stream{}, 0, fmt.Errorf("client: timestamping %q: want client-prefer, client-require or arrival", opt.Timestamping)
		}
		req.TimestampingMode = &mode
	}
	res, err := retrying(ctx, c, true, func() (*connect.Response[strandv1.ReconfigureStreamResponse], error) {
		return withLeader(c, name, func(a strandv1connect.StrandServiceClient) (*connect.Response[strandv1.ReconfigureStreamResponse], error) {
			return a.ReconfigureStream(ctx, connect.NewRequest(req))
		})
	})
	if err != nil {
		return Stream{}, 0, err
	}
	return streamOf(res.Msg.Stream), res.Msg.SeqNum, nil
}

// MoveStream moves a stream's leadership to star to (an admin token over
// every stream; ADR 0065). It returns the stream's record after the move
// and the seal's seq (0 when a retry found the stream sealed already). A
// retry of an interrupted move to the same star finishes it.
func (c *Client) MoveStream(ctx context.Context, name, to string) (Stream, uint64, error) {
	req := &strandv1.MoveStreamRequest{Stream: name, ToStar: to}
	res, err := retrying(ctx, c, true, func() (*connect.Response[strandv1.MoveStreamResponse], error) {
		return withLeader(c, name, func(a strandv1connect.StrandServiceClient) (*connect.Response[strandv1.MoveStreamResponse], error) {
			return a.MoveStream(ctx, connect.NewRequest(req))
		})
	})
	if err != nil {
		return Stream{}, 0, err
	}
	return streamOf(res.Msg.Stream), res.Msg.SealSeqNum, nil
}
