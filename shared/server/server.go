package server

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/rawjson"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/star"
)

// Config configures a server.
type Config struct {
	Star   *star.Star
	Meta   metastore.Store
	Reader *read.Reader
	// Auth checks bearer tokens. nil disables authentication: every call
	// may do everything (tests only).
	Auth *auth.Checker
	// Peers maps star ids to their API base URLs, for Leader details.
	Peers map[string]string
	// DefaultStar leads new streams ("": this star).
	DefaultStar string
	// MaxPendingAppends bounds the unacked batches of one append session
	// (0: 256).
	MaxPendingAppends int
	// Heartbeat is the read sessions' default idle heartbeat (0: 5 s).
	Heartbeat time.Duration
	// DrainTimeout bounds how long DeleteStream waits for the stream's last
	// appends to be absorbed into refs before it gives up, deleting nothing
	// (0: 30 s).
	DrainTimeout time.Duration
	// CompressReads lets Read and ReadSession responses be compressed when
	// the client accepts it (Connect clients accept gzip by default). Off
	// by default: record bodies are mostly compressed or random already,
	// and gzip was 15% of the server's CPU in a profiled catch-up read.
	// Requests are decompressed either way.
	CompressReads bool
	Clock         clock.Clock
	Rand          io.Reader // stream ids; nil: crypto/rand
	Logger        *slog.Logger

	// Limits bound every request's size and body read time (zero: the
	// defaults; see limits.go).
	Limits Limits
	// Window is the pass index window (design 014) when the absorb writes
	// pass indexes: a stream's tail and producers are recovered from its
	// parts there as well as from its refs. nil: refs only.
	Window *passindex.Window
	// PeerUp reports whether star id, at its Peers URL, serves: MoveStream
	// refuses a target for which it returns an error, before anything is
	// written (ADR 0076). nil: the gRPC health check of the URL (PeerHealth).
	PeerUp func(ctx context.Context, id, url string) error
}

// Server implements strandv1connect.StrandServiceHandler.
type Server struct {
	cfg Config
	clk clock.Clock
	log *slog.Logger

	mu       sync.Mutex
	led      map[string]metastore.Stream // streams this star leads, by name
	opened   map[format.StreamID]bool
	opening  map[format.StreamID]*opening // an open in progress (its LastRef runs outside mu)
	draining map[format.StreamID]bool     // DeleteStream in progress: no reopen
	// moved are the streams this server moved away (move.go), and moves
	// counts the moves: an open whose metastore read predates a move is
	// refused.
	moved  map[format.StreamID]movedTo
	moves  uint64
	moving map[format.StreamID]bool // MoveStream in progress
	// configuring: ReconfigureStream in progress, one per stream, so that
	// the metadata writes land in the order of the config commands.
	configuring map[format.StreamID]bool
	// unfinished are the streams sealed here for a move whose leader
	// write has not succeeded yet, by target: the next call for one
	// finishes it (finishUnfinished, ADR 0076).
	unfinished map[format.StreamID]string
	// Streams deleted are not remembered here: an open reads the stream
	// again from the metastore before the star opens it (stillActive).

	shutdown shutdown // BeginDrain, EndSessions (shutdown.go)
	quota    *quotas  // per-tenant quotas (quota.go)
}

// opening is one stream's open in progress; calls that find it wait for
// done and then look again.
type opening struct {
	done chan struct{}
	err  error
}

var _ strandv1connect.StrandServiceHandler = (*Server)(nil)

// New builds a server.
func New(cfg Config) (*Server, error) {
	if cfg.Star == nil || cfg.Meta == nil || cfg.Reader == nil {
		return nil, errors.New("server: Star, Meta and Reader are required")
	}
	if cfg.DefaultStar == "" {
		cfg.DefaultStar = cfg.Star.ID()
	}
	if cfg.MaxPendingAppends <= 0 {
		cfg.MaxPendingAppends = 256
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 5 * time.Second
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if cfg.Rand == nil {
		cfg.Rand = crand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, clk: clock.OrReal(cfg.Clock), log: cfg.Logger,
		led: map[string]metastore.Stream{}, opened: map[format.StreamID]bool{}, opening: map[format.StreamID]*opening{},
		draining: map[format.StreamID]bool{}, moved: map[format.StreamID]movedTo{}, moving: map[format.StreamID]bool{}, configuring: map[format.StreamID]bool{},
		unfinished: map[format.StreamID]string{}, quota: newQuotas(cfg.Limits)}, nil
}

// Handler returns the API's HTTP handler: the Connect service, behind
// authentication from the headers when Config.Auth is set and the bounds
// of Config.Limits (see guard), and gRPC reflection and health (see
// tooling.go), bounded but open to callers without a token.
func (s *Server) Handler() http.Handler {
	l := s.cfg.Limits.withDefaults()
	// The drain's refusals come first (shutdown.go), then the limits.
	// The call metrics (callmetrics.go) count them all, refusals included.
	calls := newCallMetrics(s.cfg.Star.Metrics(), s.clk)
	base := []connect.HandlerOption{connect.WithInterceptors(calls, shutdownInterceptor{s}, redactInterceptor{s}, movedInterceptor{s})}
	if s.cfg.Auth != nil {
		base = append(base, connect.WithInterceptors(auth.Interceptor(s.cfg.Auth)))
	}
	// The codecs count an append's records and stash it; its handler
	// decodes it once the decoding budget holds what that allocates
	// (decode.go, decode_budget.go); rawjson is Strand-Format: raw (raw.go).
	base = append(base, connect.WithCodec(protoCodec{lazy: true}), connect.WithCodec(jsonCodec{name: "json", lazy: true}),
		connect.WithCodec(jsonCodec{name: "json; charset=utf-8", lazy: true}), connect.WithCodec(jsonCodec{name: rawjson.Name, raw: true, lazy: true}))
	// Messages under 1 KiB go out uncompressed whatever the client accepts:
	// an append session's acks are tens of bytes, and resetting a gzip
	// writer for each cost 5% of the server's CPU in a profiled run.
	build := func(maxMsg, compressMin int) http.Handler {
		opts := append(slices.Clone(base), l.handlerOptions(maxMsg)...)
		_, h := strandv1connect.NewStrandServiceHandler(s, append(opts, connect.WithCompressMinBytes(compressMin))...)
		return h
	}
	// Each procedure reads messages up to its own limit: the appends up to
	// MaxMessageBytes, every other call up to MaxSmallMessageBytes.
	big, small := build(l.MaxMessageBytes, 1<<10), build(l.MaxSmallMessageBytes, 1<<10)
	reads := small
	if !s.cfg.CompressReads {
		// The read procedures' responses go out uncompressed: no message
		// reaches the minimum size for compression.
		reads = build(l.MaxSmallMessageBytes, math.MaxInt32)
	}
	mux := http.NewServeMux()
	for _, p := range procedures() {
		switch p {
		case strandv1connect.StrandServiceAppendSessionProcedure:
			mux.Handle(p, coalesceAcks(big))
		case strandv1connect.StrandServiceAppendProcedure:
			mux.Handle(p, big)
		case strandv1connect.StrandServiceReadProcedure, strandv1connect.StrandServiceReadSessionProcedure:
			mux.Handle(p, reads)
		default:
			mux.Handle(p, small)
		}
	}
	mux.Handle("/"+strandv1connect.StrandServiceName+"/", small) // unknown methods: Unimplemented
	s.mountTooling(mux, l.handlerOptions(l.MaxSmallMessageBytes)...)
	return boundWrites(l.WriteTimeout, s.guard(mux, calls)) // writebound.go
}

// AdminHandler serves /metrics (the star's registry) and /healthz: 200 and
// "ok" while the star serves (see star.Health.OK), else 503; either way one
// line per chain follows (leading, halted and why, not leading).
func AdminHandler(st *star.Star) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", st.Metrics().Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		h := st.Health()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !h.OK() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, h.String())
			return
		}
		fmt.Fprint(w, "ok\n"+h.String())
	})
	return mux
}

// allow authorizes op on name.
func (s *Server) allow(ctx context.Context, op auth.Op, name string) error {
	if s.cfg.Auth == nil {
		return nil
	}
	g, ok := auth.FromContext(ctx)
	if !ok {
		return connect.NewError(connect.CodeUnauthenticated, auth.ErrUnauthenticated)
	}
	if err := g.Allow(op, name); err != nil {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%w on stream %q", err, name))
	}
	return nil
}

func (s *Server) grant(ctx context.Context) auth.Grant {
	if s.cfg.Auth == nil {
		return auth.Grant{Ops: []auth.Op{auth.Admin}}
	}
	g, _ := auth.FromContext(ctx)
	return g
}

func invalid(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

func checkName(name string) error {
	if err := metastore.ValidateStreamName(name); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	return nil
}

// authorize checks the stream name and then op on it, before the rest of
// a request is validated: a token without access learns nothing from the
// request's other fields and the server parses no more of it.
func (s *Server) authorize(ctx context.Context, op auth.Op, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	return s.allow(ctx, op, name)
}

// lookup finds the stream by name without requiring leadership.
func (s *Server) lookup(ctx context.Context, name string) (metastore.Stream, error) {
	s.mu.Lock()
	st, ok := s.led[name]
	s.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := s.cfg.Meta.GetStream(ctx, name)
	if errors.Is(err, metastore.ErrNotFound) {
		return st, connect.NewError(connect.CodeNotFound, fmt.Errorf("stream %q does not exist: create it with CreateStream (strand create %s)", name, name))
	}
	if err != nil {
		return st, toConnect(fmt.Errorf("look up stream %q: %w", name, err))
	}
	if st.State == metastore.StreamDeleting {
		return st, connect.NewError(connect.CodeNotFound, fmt.Errorf("stream %q is being deleted", name))
	}
	return st, nil
}

// leading finds the stream, checks that this star leads it, and opens it on
// the star if it is not open yet (recovering its tail from the last ref).
func (s *Server) leading(ctx context.Context, op auth.Op, name string) (metastore.Stream, format.StreamID, error) {
	var id format.StreamID
	if err := checkName(name); err != nil {
		return metastore.Stream{}, id, err
	}
	if err := s.allow(ctx, op, name); err != nil {
		return metastore.Stream{}, id, err
	}
	st, err := s.lookup(ctx, name)
	if err != nil {
		return st, id, err
	}
	if st.Star != s.cfg.Star.ID() {
		return st, id, s.notLeader(st.Star, fmt.Errorf("stream %q is led by %s, not %s", name, st.Star, s.cfg.Star.ID()))
	}
	id, err = format.ParseStreamID(st.ID)
	if err != nil {
		return st, id, connect.NewError(connect.CodeInternal, fmt.Errorf("stream %q has a malformed id: %w", name, err))
	}
	if err := s.open(ctx, st, id); err != nil {
		return st, id, err
	}
	return st, id, s.finishUnfinished(ctx, st, id)
}

// open opens the stream on the star unless it is open, recovering its tail
// from the last ref. The metastore read runs outside s.mu (a slow LastRef
// delays only this stream's calls) and once per stream at a time: calls
// that find an open in progress wait for it. The stream's state is checked
// again under s.mu just before Star.Open, so a DeleteStream that drained or
// deleted it meanwhile wins: a deleted stream is never reopened.
func (s *Server) open(ctx context.Context, st metastore.Stream, id format.StreamID) error {
	for {
		s.mu.Lock()
		if err := s.gone(st, id); err != nil {
			s.mu.Unlock()
			return err
		}
		if s.opened[id] {
			s.mu.Unlock()
			return nil
		}
		if op := s.opening[id]; op != nil {
			s.mu.Unlock()
			select {
			case <-op.done:
			case <-ctx.Done():
				return toConnect(ctx.Err())
			}
			if op.err != nil && !errors.Is(op.err, context.Canceled) && !errors.Is(op.err, context.DeadlineExceeded) {
				return op.err
			}
			continue // opened, or the opener's own context ended: look again
		}
		op := &opening{done: make(chan struct{})}
		s.opening[id] = op
		s.mu.Unlock()

		s.mu.Lock()
		gen := s.moves // before stillActive's read (movedAway)
		s.mu.Unlock()
		info, err := s.recoverTail(ctx, st, id)
		if err == nil {
			err = s.stillActive(ctx, st)
		}
		if to, sealed := star.Sealed(info.Commands); err == nil && sealed && to != s.cfg.Star.ID() {
			err = s.rollForward(ctx, st, id, to) // never unsealed here (ADR 0065)
		}
		s.mu.Lock()
		if err == nil {
			err = s.gone(st, id)
		}
		if err == nil {
			err = s.movedAway(st, id, gen)
		}
		if err == nil {
			if oerr := s.cfg.Star.Open(info); oerr != nil {
				err = connect.NewError(connect.CodeFailedPrecondition, oerr)
			} else {
				s.opened[id] = true
				s.led[st.Name] = st
			}
		}
		delete(s.opening, id)
		op.err = err
		close(op.done)
		s.mu.Unlock()
		return err
	}
}

// gone reports a stream being deleted here. Called with s.mu.
func (s *Server) gone(st metastore.Stream, id format.StreamID) error {
	if s.draining[id] {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("stream %q is being deleted", st.Name))
	}
	return nil
}

// stillActive reads the stream again, after its open was registered: st
// may have been looked up before a DeleteStream marked it deleting, and a
// DeleteStream that ended before this open was registered has marked it
// in the metastore, the one record of deleted streams (so the server
// keeps none of its own).
func (s *Server) stillActive(ctx context.Context, st metastore.Stream) error {
	now, err := s.cfg.Meta.GetStream(ctx, st.Name)
	if errors.Is(err, metastore.ErrNotFound) || err == nil && (now.ID != st.ID || now.State != metastore.StreamActive) {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("stream %q is being deleted", st.Name))
	}
	if err != nil {
		return toConnect(fmt.Errorf("look up stream %q: %w", st.Name, err))
	}
	if now.Star != s.cfg.Star.ID() {
		// Moved away since st was read (ADR 0065).
		s.mu.Lock()
		delete(s.led, st.Name)
		s.mu.Unlock()
		return s.notLeader(now.Star, fmt.Errorf("stream %q is led by %s, not %s", st.Name, now.Star, s.cfg.Star.ID()))
	}
	return nil
}

// recoverTail reads where the stream's tail is from its last ref, and its
// producers' last batches from its last refs (star.RecoverStream); with the
// pass index, from its parts in the window first.
func (s *Server) recoverTail(ctx context.Context, st metastore.Stream, id format.StreamID) (star.StreamInfo, error) {
	var refs star.RefReader = s.cfg.Meta
	if s.cfg.Window != nil {
		refs = s.cfg.Window.ForStream(st)
	}
	info, err := star.RecoverStream(ctx, refs, id, st.Class, s.clk.Now())
	if err != nil {
		return info, toConnect(fmt.Errorf("recover the tail of %q: %w", st.Name, err))
	}
	info.Next = max(info.Next, st.Floor) // the tail never moves backward (trim's floor)
	info.Config = configOf(st)           // until a config command changes it (info.Commands)
	return info, nil
}

func (s *Server) notLeader(leader string, err error) error {
	ce := connect.NewError(connect.CodeUnavailable, err)
	if d, derr := connect.NewErrorDetail(&strandv1.Leader{Star: leader, Url: s.cfg.Peers[leader]}); derr == nil {
		ce.AddDetail(d)
	}
	return ce
}

// starGone reports whether err is the star's refusal because it no
// longer serves: closed or quiesced, or its lease lost. Nothing of the
// refused call was written. (A halted epoch is not: the star recovers it,
// or its successor, of the same id, does.)
func starGone(err error) bool {
	return errors.Is(err, star.ErrClosed) || errors.Is(err, star.ErrNotLeader)
}

// leaderNow is err, the star's refusal of a call on stream name, as
// toConnect answers it; but a refusal because the star no longer serves
// (starGone) while the metastore names another star (a move or a
// takeover written since) is unavailable with a Leader detail naming it,
// as every other such answer is, and the server forgets it led the
// stream; during a drain it is the drain's answer (drainErr, naming this
// star, whose successor takes the same id over). Without the detail a
// client retried the old star until its deadline, and the Kafka front end
// answered REQUEST_TIMED_OUT, which a producer retries on the same broker
// without a metadata refresh. A refusal naming this star otherwise is
// answered as before, without a detail: the Kafka front end takes one
// naming this star for the drain's and holds the produce (ADR 0071).
func (s *Server) leaderNow(ctx context.Context, name string, err error) error {
	if !starGone(err) {
		return toConnect(err)
	}
	st, gerr := s.cfg.Meta.GetStream(ctx, name)
	if gerr != nil || st.Star == "" {
		return toConnect(err)
	}
	self := s.cfg.Star.ID()
	if st.Star == self {
		if s.shutdown.refusing.Load() {
			return s.drainErr()
		}
		return toConnect(err)
	}
	s.mu.Lock()
	delete(s.led, name)
	s.mu.Unlock()
	return s.notLeader(st.Star, fmt.Errorf("star %s no longer serves stream %q, led by %s now: %w", self, name, st.Star, err))
}

// toConnect maps an error to its Connect code (see the package doc).
func toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	var mis *star.SeqMismatchError
	if errors.As(err, &mis) {
		e := connect.NewError(connect.CodeFailedPrecondition, err)
		if d, derr := connect.NewErrorDetail(&strandv1.Tail{NextSeqNum: mis.Tail}); derr == nil {
			e.AddDetail(d)
		}
		return e
	}
	code := connect.CodeInternal
	switch {
	case errors.Is(err, context.Canceled):
		code = connect.CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		code = connect.CodeDeadlineExceeded
	case errors.Is(err, format.ErrEmptyBatch), errors.Is(err, format.ErrBatchTooLarge), errors.Is(err, format.ErrRecordInvalid),
		errors.Is(err, metastore.ErrInvalid), errors.Is(err, read.ErrInvalid), errors.Is(err, auth.ErrInvalid):
		code = connect.CodeInvalidArgument
	case errors.Is(err, star.ErrMoved):
		code = connect.CodeUnavailable // movedInterceptor adds the new leader
	case errors.Is(err, star.ErrUnknownStream):
		return unknownStream()
	case errors.Is(err, star.ErrBadCommand), errors.Is(err, star.ErrTimestampRequired), errors.Is(err, star.ErrTimestampTooFar):
		code = connect.CodeInvalidArgument
	case errors.Is(err, star.ErrBatchSeqGap), errors.Is(err, star.ErrBatchSeqTooOld), errors.Is(err, star.ErrFenced):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, metastore.ErrNotFound):
		code = connect.CodeNotFound
	case errors.Is(err, metastore.ErrExists):
		code = connect.CodeAlreadyExists
	case errors.Is(err, auth.ErrUnauthenticated), errors.Is(err, auth.ErrRevoked), errors.Is(err, auth.ErrExpired):
		code = connect.CodeUnauthenticated
	case errors.Is(err, auth.ErrDenied):
		code = connect.CodePermissionDenied
	case errors.Is(err, star.ErrOutcomeUnknown):
		// Not Unavailable: generic retry policies retry that blindly, and a
		// blind retry of a batch that may be committed writes it twice.
		code = connect.CodeAborted
	case errors.Is(err, star.ErrNotLeader), errors.Is(err, star.ErrClosed), errors.Is(err, star.ErrNotStarted), errors.Is(err, star.ErrHalted),
		errors.Is(err, metastore.ErrUnavailable), errors.Is(err, objstore.ErrUnavailable):
		code = connect.CodeUnavailable
	case errors.Is(err, read.ErrCorrupt), errors.Is(err, chain.ErrNoCopy):
		code = connect.CodeDataLoss
	}
	return connect.NewError(code, err)
}

func classOf(c strandv1.StorageClass) (metastore.Class, error) {
	switch c {
	case strandv1.StorageClass_STORAGE_CLASS_UNSPECIFIED, strandv1.StorageClass_STORAGE_CLASS_STANDARD:
		return metastore.Standard, nil
	case strandv1.StorageClass_STORAGE_CLASS_EXPRESS:
		return metastore.Express, nil
	}
	return 0, invalid("unknown storage_class %d (want STORAGE_CLASS_STANDARD or STORAGE_CLASS_EXPRESS)", c)
}

func streamMsg(st metastore.Stream) *strandv1.Stream {
	c := strandv1.StorageClass_STORAGE_CLASS_STANDARD
	if st.Class == metastore.Express {
		c = strandv1.StorageClass_STORAGE_CLASS_EXPRESS
	}
	return &strandv1.Stream{Name: st.Name, Id: st.ID, StorageClass: c, Leader: st.Star, CreatedMs: st.CreatedMs,
		RetentionMs: st.RetentionMs, Deleting: st.State == metastore.StreamDeleting, Timestamping: timestampingMsg(st.Timestamping)}
}

// CreateStream implements the API.
func (s *Server) CreateStream(ctx context.Context, req *connect.Request[strandv1.CreateStreamRequest]) (*connect.Response[strandv1.CreateStreamResponse], error) {
	m := req.Msg
	if err := checkName(m.Name); err != nil {
		return nil, err
	}
	if err := s.allow(ctx, auth.Admin, m.Name); err != nil {
		return nil, err
	}
	if err := checkVisible("stream name", m.Name); err != nil {
		return nil, err
	}
	class, err := classOf(m.StorageClass)
	if err != nil {
		return nil, err
	}
	if m.RetentionMs < 0 {
		return nil, invalid("retention_ms %d is negative (0 keeps forever)", m.RetentionMs)
	}
	stamping, err := timestampingOf(m.Timestamping)
	if err != nil {
		return nil, err
	}
	// Refuse before recording anything: a stream this star would lead but
	// cannot open (no bucket set of its class) could never be appended to,
	// and its name would stay taken.
	if s.cfg.DefaultStar == s.cfg.Star.ID() && !slices.Contains(s.cfg.Star.Chains(), metastore.ChainID{Star: s.cfg.Star.ID(), Class: class}) {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("create stream %q: star %s has no %s bucket set; choose the other storage class", m.Name, s.cfg.Star.ID(), class))
	}
	release, err := s.streamQuota(ctx, m.Name)
	if err != nil {
		return nil, err
	}
	defer release()
	var id format.StreamID
	if _, err := io.ReadFull(s.cfg.Rand, id[:]); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("draw a stream id: %w", err))
	}
	st := metastore.Stream{Name: m.Name, ID: id.String(), Class: class, Star: s.cfg.DefaultStar,
		CreatedMs: s.clk.Now().UnixMilli(), RetentionMs: m.RetentionMs, State: metastore.StreamActive, Timestamping: stamping}
	got, err := s.cfg.Meta.CreateStream(ctx, st)
	if errors.Is(err, metastore.ErrExists) {
		why := "choose another name or delete it first"
		if got.State == metastore.StreamDeleting {
			why = "it is being deleted in place (a version before names were retired marked it); retry once trim has removed it"
		}
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("stream %q already exists: %s", m.Name, why))
	}
	if err != nil {
		return nil, toConnect(fmt.Errorf("create stream %q: %w", m.Name, err))
	}
	if st.Star == s.cfg.Star.ID() {
		if err := s.cfg.Star.Open(star.StreamInfo{ID: id, Class: class, Config: configOf(st)}); err != nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, err)
		}
		s.mu.Lock()
		s.opened[id] = true
		s.led[st.Name] = st
		s.mu.Unlock()
	}
	s.log.Info("stream created", "stream", st.Name, "id", st.ID, "class", class.String(), "leader", st.Star)
	return connect.NewResponse(&strandv1.CreateStreamResponse{Stream: streamMsg(st)}), nil
}

// DeleteStream implements the API: the stream stops taking appends and
// reads at once and leaves its name, which CreateStream may take for a
// new stream (a new id) at once; trim removes the old id's data in the
// background (metastore SetStreamState, ListDeleting). Before the
// stream is marked deleting, the star drains it: its last appends are
// absorbed into refs, so that no ref for it is written after trim has
// removed its metadata. If that takes longer than Config.DrainTimeout the
// call fails with Unavailable and deletes nothing (appends resume).
func (s *Server) DeleteStream(ctx context.Context, req *connect.Request[strandv1.DeleteStreamRequest]) (*connect.Response[strandv1.DeleteStreamResponse], error) {
	name := req.Msg.Name
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := s.allow(ctx, auth.Admin, name); err != nil {
		return nil, err
	}
	st, err := s.lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	if st.Star != s.cfg.Star.ID() {
		return nil, s.notLeader(st.Star, fmt.Errorf("stream %q is led by %s, not %s", name, st.Star, s.cfg.Star.ID()))
	}
	if id, err := format.ParseStreamID(st.ID); err == nil {
		release, err := s.drain(ctx, name, id)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	if err := s.cfg.Meta.SetStreamState(ctx, name, st.ID, metastore.StreamDeleting); err != nil {
		return nil, toConnect(fmt.Errorf("delete stream %q: %w", name, err))
	}
	s.mu.Lock()
	delete(s.led, name)
	s.mu.Unlock()
	s.log.Info("stream deleted", "stream", name, "id", st.ID)
	return connect.NewResponse(&strandv1.DeleteStreamResponse{}), nil
}

// drain takes the stream off the star (Star.Drain, bounded by
// Config.DrainTimeout) and keeps it from being reopened until release is
// called. Once drained, everything of the stream is in refs, so a reopen
// after release (if marking it deleting fails) recovers the right tail.
func (s *Server) drain(ctx context.Context, name string, id format.StreamID) (release func(), err error) {
	s.mu.Lock()
	if s.draining[id] {
		s.mu.Unlock()
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: stream %q is being deleted by another DeleteStream call, which is draining its last appends; this call deleted nothing (the stream is gone once that call succeeds: GetStream answers not_found)", ErrDeleteInProgress, name))
	}
	s.draining[id] = true
	s.mu.Unlock()
	// release first waits for an open of the stream registered before the
	// drain began (it fails: the stream is draining); an open registered
	// after release reads the stream again (stillActive), after it was
	// marked deleting.
	release = func() {
		for {
			s.mu.Lock()
			op := s.opening[id]
			if op == nil {
				delete(s.draining, id)
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-op.done
		}
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
	defer cancel()
	if err := s.cfg.Star.Drain(dctx, id); err != nil {
		release()
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("delete stream %q: its last appends are not yet absorbed into refs, so nothing was deleted; retry: %w", name, err))
	}
	s.mu.Lock()
	delete(s.opened, id)
	s.mu.Unlock()
	return release, nil
}

// ListStreams implements the API: names under both the request's prefix
// and the token's.
func (s *Server) ListStreams(ctx context.Context, req *connect.Request[strandv1.ListStreamsRequest]) (*connect.Response[strandv1.ListStreamsResponse], error) {
	m := req.Msg
	limit := int(m.Limit)
	switch {
	case m.Limit < 0 || m.Limit > 1000:
		return nil, invalid("limit %d out of range (1 to 1000; 0 means 100)", m.Limit)
	case limit == 0:
		limit = 100
	}
	g := s.grant(ctx)
	if !g.Can(auth.Read) {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%w: listing needs the read operation", auth.ErrDenied))
	}
	prefix := m.Prefix
	switch {
	case strings.HasPrefix(prefix, g.Prefix):
	case strings.HasPrefix(g.Prefix, prefix):
		prefix = g.Prefix
	default:
		return connect.NewResponse(&strandv1.ListStreamsResponse{}), nil
	}
	sts, next, err := s.cfg.Meta.ListStreams(ctx, prefix, m.StartAfter, limit)
	if err != nil {
		return nil, toConnect(fmt.Errorf("list streams: %w", err))
	}
	out := &strandv1.ListStreamsResponse{NextStartAfter: next}
	for _, st := range sts {
		out.Streams = append(out.Streams, streamMsg(st))
	}
	return connect.NewResponse(out), nil
}

// GetStream implements the API (any star answers).
func (s *Server) GetStream(ctx context.Context, req *connect.Request[strandv1.GetStreamRequest]) (*connect.Response[strandv1.GetStreamResponse], error) {
	name := req.Msg.Name
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := s.allow(ctx, auth.Read, name); err != nil {
		return nil, err
	}
	st, err := s.lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&strandv1.GetStreamResponse{Stream: streamMsg(st)}), nil
}

// CheckTail implements the API; read or append tokens may ask.
func (s *Server) CheckTail(ctx context.Context, req *connect.Request[strandv1.CheckTailRequest]) (*connect.Response[strandv1.CheckTailResponse], error) {
	op := auth.Read
	if g := s.grant(ctx); !g.Can(auth.Read) && g.Can(auth.Append) {
		op = auth.Append
	}
	_, id, err := s.leading(ctx, op, req.Msg.Stream)
	if err != nil {
		return nil, err
	}
	next, ts, err := s.cfg.Star.Tail(id)
	if err != nil {
		return nil, toConnect(err)
	}
	// The command state as of the acknowledged tail: its trim point, and
	// whether it is fenced (never the token).
	cmds, err := s.cfg.Star.Commands(id)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&strandv1.CheckTailResponse{NextSeqNum: next, LastTimestampMs: ts,
		TrimSeqNum: cmds.TrimSeq, Fenced: cmds.FenceToken != ""}), nil
}

// Append implements the API.
func (s *Server) Append(ctx context.Context, req *connect.Request[strandv1.AppendRequest]) (*connect.Response[strandv1.AppendResponse], error) {
	if err := s.authorizeAppend(ctx, req.Msg); err != nil {
		return nil, err // before decoding it (appendstream.go)
	}
	if err := decodeAppend(ctx, req.Msg); err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, auth.Append, req.Msg.GetStream()); err != nil {
		return nil, err
	}
	a, err := ParseAppend(req.Msg)
	if err != nil {
		return nil, err
	}
	_, id, err := s.leading(ctx, auth.Append, a.Stream)
	if err != nil {
		return nil, err
	}
	if err := s.appendQuota(ctx, a.Stream, a.Records); err != nil {
		return nil, err
	}
	p, err := s.cfg.Star.Submit(ctx, id, a.Records, s.appendOptions(ctx, a))
	messageDone(ctx) // the pool bounds the batch now: the body's share of the decoding budget goes back
	if err != nil {
		return nil, s.leaderNow(ctx, a.Stream, err)
	}
	ack, err := p.Wait(ctx)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(ackMsg(ack)), nil
}

func ackMsg(a star.Ack) *strandv1.AppendResponse {
	return &strandv1.AppendResponse{StartSeqNum: a.FirstSeq, EndSeqNum: a.LastSeq + 1, NextSeqNum: a.Tail, LastTimestampMs: a.LastTsMs}
}

// AppendSession implements the API (see the package doc).
func (s *Server) AppendSession(ctx context.Context, bs *connect.BidiStream[strandv1.AppendRequest, strandv1.AppendResponse]) (err error) {
	defer func() { err = cmp.Or(sessionEnded(ctx), err) }() // its token was revoked or expired
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan pending, s.cfg.MaxPendingAppends)
	go func() {
		defer close(ch)
		push := func(p pending) bool {
			select {
			case ch <- p:
				return p.err == nil
			case <-ctx.Done():
				return false
			}
		}
		for {
			req, err := bs.Receive()
			if errors.Is(err, io.EOF) {
				return
			}
			if err == nil {
				err = s.authorizeAppend(ctx, req) // before decoding it (appendstream.go)
			}
			if err == nil {
				err = decodeAppend(ctx, req)
			}
			if err != nil {
				push(pending{err: err})
				return
			}
			if err := s.authorize(ctx, auth.Append, req.GetStream()); err != nil {
				push(pending{err: err})
				return
			}
			a, err := ParseAppend(req)
			if err != nil {
				push(pending{err: err})
				return
			}
			_, id, err := s.leading(ctx, auth.Append, a.Stream)
			if err == nil {
				err = s.appendQuota(ctx, a.Stream, a.Records)
			}
			if err != nil {
				push(pending{err: err})
				return
			}
			p, err := s.cfg.Star.Submit(ctx, id, a.Records, s.appendOptions(ctx, a))
			messageDone(ctx) // the pool bounds the batch now (or it was refused)
			if err != nil {
				err = s.leaderNow(ctx, a.Stream, err)
			}
			if !push(pending{p: p, err: err}) {
				return
			}
		}
	}()
	fl := sessionFlusher(ctx)
	return sendAcks(ctx, ch, func(a star.Ack) error { return bs.Send(ackMsg(a)) }, fl.setHold)
}

// Read implements the API.
func (s *Server) Read(ctx context.Context, req *connect.Request[strandv1.ReadRequest]) (*connect.Response[strandv1.ReadResponse], error) {
	if err := s.authorize(ctx, auth.Read, req.Msg.GetStream()); err != nil {
		return nil, err
	}
	r, err := ParseRead(req.Msg)
	if err != nil {
		return nil, err
	}
	st, _, err := s.leading(ctx, auth.Read, r.Stream)
	if err != nil {
		return nil, err
	}
	res, err := s.cfg.Reader.Read(ctx, st, r.Start, r.Limits)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&strandv1.ReadResponse{Records: recordsMsg(res.Records, s.hideFence(ctx)), NextSeqNum: res.Tail, LastTimestampMs: res.LastTsMs}), nil
}

// ReadSession implements the API.
func (s *Server) ReadSession(ctx context.Context, req *connect.Request[strandv1.ReadSessionRequest], ss *connect.ServerStream[strandv1.ReadSessionResponse]) (err error) {
	defer func() { err = cmp.Or(sessionEnded(ctx), err) }() // its token was revoked or expired
	if err := s.authorize(ctx, auth.Read, req.Msg.GetStream()); err != nil {
		return err
	}
	r, err := ParseReadSession(req.Msg, s.cfg.Heartbeat)
	if err != nil {
		return err
	}
	st, id, err := s.leading(ctx, auth.Read, r.Stream)
	if err != nil {
		return err
	}
	if !r.Options.NoTail {
		if err := s.answerOpen(ss, id); err != nil {
			return err
		}
	}
	hide := s.hideFence(ctx)
	err = s.cfg.Reader.Session(ctx, st, r.Start, r.Options, func(b read.Batch) error {
		return ss.Send(&strandv1.ReadSessionResponse{Records: recordsMsg(b.Records, hide), NextSeqNum: b.Tail, LastTimestampMs: b.LastTsMs, Heartbeat: b.Heartbeat})
	})
	if err != nil && ctx.Err() != nil {
		return nil // the client went away
	}
	return toConnect(err)
}

// hideFence reports whether the caller may not see fencing tokens: a
// token without the fence operation reads fence records without their
// body (the token a writer must present is not revealed by reading).
func (s *Server) hideFence(ctx context.Context) bool { return !s.grant(ctx).Can(auth.Fence) }

// recordsMsg is recs as the API answers them; with hideFence, fence
// command records without their body.
func recordsMsg(recs []star.SeqRecord, hideFence bool) []*strandv1.SequencedRecord {
	out := make([]*strandv1.SequencedRecord, len(recs))
	for i, r := range recs {
		m := &strandv1.SequencedRecord{SeqNum: r.Seq, TimestampMs: r.TimestampMs, Body: r.Body}
		if hideFence && format.CommandOf(r.Record) == format.CommandFence {
			m.Body = nil
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, &strandv1.Header{Name: h.Name, Value: h.Value})
		}
		out[i] = m
	}
	return out
}
