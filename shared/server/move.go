package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/star"
)

// Moving a stream to another star (ADR 0065): MoveStream seals the stream
// on this star (Star.Seal), drains it (Star.Drain: the seal and everything
// before it absorbed) and writes the new leader (metastore MoveStream).
// The server then remembers the move (moved), so an open of the stream
// that read the metastore before the write never reopens it here; an open
// that finds the stream sealed to another star while the metastore still
// names this one rolls the move forward (rollForward). A move that
// failed after its seal while this process lives is finished by the
// stream's next call here (finishUnfinished, ADR 0076); a target that
// does not serve is refused before the seal (targetServing).

// ErrMoveRefused prefixes a MoveStream the server refuses outright:
// nothing was written.
var ErrMoveRefused = errors.New("server: move refused")

// movedTo is a stream this server moved away, and the value of moves
// when it did.
type movedTo struct {
	to  string
	gen uint64
}

// MoveArgs is a validated MoveStream request.
type MoveArgs struct {
	Stream string
	To     string
}

// ParseMove validates a MoveStream request: a valid stream name and a
// target star id of 1 to star.MaxMoveTarget bytes of printable ASCII
// without spaces (star ids travel in the seal's token and in flags).
// Failures are CodeInvalidArgument with the reason.
func ParseMove(m *strandv1.MoveStreamRequest) (MoveArgs, error) {
	if err := checkName(m.GetStream()); err != nil {
		return MoveArgs{}, err
	}
	to := m.GetToStar()
	if to == "" || len(to) > star.MaxMoveTarget {
		return MoveArgs{}, invalid("%v: to_star is %d bytes (1 to %d)", ErrMoveRefused, len(to), star.MaxMoveTarget)
	}
	for i := range len(to) {
		if to[i] <= ' ' || to[i] > '~' {
			return MoveArgs{}, invalid("%v: to_star %q: a star id is printable ASCII without spaces", ErrMoveRefused, to)
		}
	}
	return MoveArgs{Stream: m.Stream, To: to}, nil
}

// MoveStream implements the API (operator admin only).
func (s *Server) MoveStream(ctx context.Context, req *connect.Request[strandv1.MoveStreamRequest]) (*connect.Response[strandv1.MoveStreamResponse], error) {
	// Where a stream is led is the operator's choice: an admin grant over
	// the whole keyspace, checked before anything is parsed or read.
	if g := s.grant(ctx); !g.Can(auth.Admin) || g.Prefix != "" {
		return nil, connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%w: moving a stream needs an admin token over every stream (an empty prefix); this token's prefix is %q", auth.ErrDenied, g.Prefix))
	}
	a, err := ParseMove(req.Msg)
	if err != nil {
		return nil, err
	}
	name, to := a.Stream, a.To
	self := s.cfg.Star.ID()
	if _, ok := s.cfg.Peers[to]; !ok && to != self {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%w: unknown star %q (known: %s)", ErrMoveRefused, to, strings.Join(s.stars(), ", ")))
	}
	st, err := s.fresh(ctx, name)
	if err != nil {
		return nil, err
	}
	if st.Star == to {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: stream %q is led by %s already", ErrMoveRefused, name, to))
	}
	if st.Star != self {
		return nil, s.notLeader(st.Star, fmt.Errorf("stream %q is led by %s, not %s", name, st.Star, self))
	}
	id, err := format.ParseStreamID(st.ID)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("stream %q has a malformed id: %w", name, err))
	}
	if err := s.priorSettled(ctx, st); err != nil {
		return nil, err
	}
	if err := s.targetHasClass(ctx, st, to); err != nil {
		return nil, err
	}
	if err := s.targetServing(ctx, name, to); err != nil {
		return nil, err
	}
	// One move of a stream at a time: a second one would find the stream
	// drained (Drain returns at once for a stream not open) and write the
	// new leader before the first one's seal is absorbed.
	if !s.startOne(s.moving, id) {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("stream %q: another MoveStream of it is in progress on this star; retry", name))
	}
	defer s.endOne(s.moving, id)
	if err := s.open(ctx, st, id); err != nil {
		if now, ferr := s.fresh(ctx, name); ferr == nil && now.Star == to {
			// The open found the stream sealed for this very move and
			// rolled it forward (rollForward): done.
			return connect.NewResponse(&strandv1.MoveStreamResponse{Stream: streamMsg(now)}), nil
		}
		return nil, err
	}
	ack, err := s.cfg.Star.Seal(ctx, id, to)
	var me *star.MovedError
	switch {
	case errors.As(err, &me):
		// Sealed for another move (an interrupted one): not wrapped, so
		// that movedInterceptor leaves the answer as it is.
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: stream %q is sealed for a move to %s already: finish that one (MoveStream to %s)", ErrMoveRefused, name, me.To, me.To))
	case errors.Is(err, star.ErrBadCommand):
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%w: %w", ErrMoveRefused, err))
	case errors.Is(err, star.ErrUnknownStream):
		// Drained by a move or a delete that finished meanwhile.
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("stream %q is being moved or deleted by another call; look it up again: %w", name, err))
	case err != nil:
		return nil, s.leaderNow(ctx, name, fmt.Errorf("seal stream %q for star %s: %w", name, to, err))
	}
	s.mu.Lock()
	s.unfinished[id] = to // until finishMove's write: a later call finishes it
	s.mu.Unlock()
	if err := s.finishMove(ctx, st, id, to); err != nil {
		return nil, err
	}
	st.Star = to
	return connect.NewResponse(&strandv1.MoveStreamResponse{Stream: streamMsg(st), SealSeqNum: ack.FirstSeq}), nil
}

// finishMove drains a sealed stream off this star and writes its new
// leader; the stream stays sealed whatever fails (a retry finishes it).
func (s *Server) finishMove(ctx context.Context, st metastore.Stream, id format.StreamID, to string) error {
	dctx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
	defer cancel()
	if err := s.cfg.Star.Drain(dctx, id); err != nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("move stream %q to %s: it is sealed, but its last appends are not yet absorbed; retry MoveStream to finish: %w", st.Name, to, err))
	}
	if err := s.stillSealed(ctx, st, to); err != nil {
		return err
	}
	if err := s.cfg.Meta.MoveStream(ctx, st.Name, st.ID, s.cfg.Star.ID(), to); err != nil {
		return toConnect(fmt.Errorf("move stream %q to %s: it is sealed and drained, but writing its new leader failed; retry MoveStream to finish: %w", st.Name, to, err))
	}
	s.mu.Lock()
	s.moves++
	s.moved[id] = movedTo{to: to, gen: s.moves}
	delete(s.opened, id)
	delete(s.led, st.Name)
	delete(s.unfinished, id)
	s.mu.Unlock()
	s.log.Info("stream moved", "stream", st.Name, "id", st.ID, "to", to)
	return nil
}

// ErrMoveOvertaken refuses to finish a move whose seal is no longer the
// stream's durable state (nothing written): the stream moved on, and
// came back to this star, since this process sealed it.
var ErrMoveOvertaken = errors.New("server: move overtaken")

// stillSealed derives the move's leader write from durable state, not
// from this process's memory (ADR 0076): the write is conditioned on the
// metastore naming this star, which it does again after the stream moved
// on and came back, so a process that sealed it long ago (a zombie
// deposed by its successor, which finished that move) must not write the
// old seal's target again: that star would open the stream at the tail
// this star's successor appends at. So the stream's last part, read as
// recovery reads it (both windows, with the stream as the metastore has
// it now), must be the seal for to. A stream the metastore already names
// to needs no check (the write is a no-op). ErrMoveOvertaken (and
// metastore.ErrConflict) otherwise.
func (s *Server) stillSealed(ctx context.Context, st metastore.Stream, to string) error {
	now, err := s.cfg.Meta.GetStream(ctx, st.Name)
	if errors.Is(err, metastore.ErrNotFound) || err == nil && (now.ID != st.ID || now.Star == to) {
		return nil // gone, recreated or moved already: MoveStream's write says so
	}
	if err != nil {
		return toConnect(fmt.Errorf("move stream %q to %s: look it up: %w", st.Name, to, err))
	}
	var refs star.RefReader = s.cfg.Meta
	if s.cfg.Window != nil {
		refs = s.cfg.Window.ForStream(now)
	}
	last, err := refs.LastRef(ctx, st.ID)
	if err != nil {
		return toConnect(fmt.Errorf("move stream %q to %s: read its last part: %w", st.Name, to, err))
	}
	if got, ok := star.Sealed(last.Commands); !ok || got != to {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: stream %q: its last part (seqs %d-%d) is not the seal for %s this process wrote; the stream moved on since, nothing written: %w",
			ErrMoveOvertaken, st.Name, last.FirstSeq, last.LastSeq, to, metastore.ErrConflict))
	}
	return nil
}

// finishUnfinished finishes the move of a stream sealed here whose
// MoveStream failed after the seal (the drain or the leader write), so
// that the stream does not wait for an operator's retry (ADR 0076): the
// seal decided the move, and the leader it names is derived state any
// call may write. It runs one at a time per stream with MoveStream (the
// moving mark; a call that finds one running is sent to the target). It
// returns nil for a stream with no unfinished move, else the new leader
// (unavailable with a Leader detail) or why finishing failed; a stream
// deleted or recreated meanwhile has nothing left to finish.
func (s *Server) finishUnfinished(ctx context.Context, st metastore.Stream, id format.StreamID) error {
	s.mu.Lock()
	to, ok := s.unfinished[id]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if !s.startOne(s.moving, id) { // a MoveStream of it runs
		return s.notLeader(to, fmt.Errorf("stream %q is being moved to %s", st.Name, to))
	}
	defer s.endOne(s.moving, id)
	err := s.finishMove(ctx, st, id, to)
	if errors.Is(err, metastore.ErrNotFound) || errors.Is(err, metastore.ErrConflict) {
		s.mu.Lock()
		delete(s.unfinished, id)
		s.mu.Unlock()
	}
	switch {
	case errors.Is(err, ErrMoveOvertaken):
		return nil // the call goes on as if this process had never sealed it
	case err != nil:
		return err
	}
	return s.notLeader(to, fmt.Errorf("stream %q moved to %s", st.Name, to))
}

// startOne marks a call of stream id in progress in busy (moving:
// MoveStream and finishUnfinished; configuring: ReconfigureStream), false
// when one is already; endOne clears it.
func (s *Server) startOne(busy map[format.StreamID]bool, id format.StreamID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if busy[id] {
		return false
	}
	busy[id] = true
	return true
}

func (s *Server) endOne(busy map[format.StreamID]bool, id format.StreamID) {
	s.mu.Lock()
	delete(busy, id)
	s.mu.Unlock()
}

// rollForward finishes a move found sealed in the stream's durable state
// (its old leader died between the seal and the metastore write): the
// stream's record still names this star, the seal names to.
func (s *Server) rollForward(ctx context.Context, st metastore.Stream, id format.StreamID, to string) error {
	if err := s.cfg.Meta.MoveStream(ctx, st.Name, st.ID, s.cfg.Star.ID(), to); err != nil {
		return toConnect(fmt.Errorf("stream %q is sealed for a move to %s; finishing the move failed: %w", st.Name, to, err))
	}
	s.mu.Lock()
	s.moves++
	s.moved[id] = movedTo{to: to, gen: s.moves}
	delete(s.led, st.Name)
	s.mu.Unlock()
	s.log.Info("stream move rolled forward", "stream", st.Name, "id", st.ID, "to", to)
	return s.notLeader(to, fmt.Errorf("stream %q moved to %s", st.Name, to))
}

// priorSettled refuses to move a stream again while the pass index
// window of the star it last moved from (Stream.From) still holds parts
// of it: the window reads the stream's parts in two chains only, its
// leader's and that one, so those parts must be in refs (settle flushes
// them, at most its flush age after they were absorbed) before From
// changes. A move back to From waits too (ADR 0076): that chain's window
// would then hold two runs of the stream's parts with another star's
// seqs between them, which settle's flush of the chain does not take
// (the move simulation's third star found settle stuck on it).
func (s *Server) priorSettled(ctx context.Context, st metastore.Stream) error {
	if s.cfg.Window == nil || st.From == "" || st.From == st.Star {
		return nil
	}
	prev := st
	prev.Star, prev.From = st.From, ""
	parts, err := s.cfg.Window.StreamParts(ctx, prev, 0)
	if err != nil {
		return toConnect(fmt.Errorf("move stream %q: read its parts left on %s: %w", st.Name, st.From, err))
	}
	if len(parts) > 0 {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: stream %q moved from %s recently, and %d of its parts there are not yet settled into refs; nothing was written: retry once settle has flushed them (at most its flush age)", ErrMoveRefused, st.Name, st.From, len(parts)))
	}
	return nil
}

// targetHasClass refuses a move to a star that has no chain of the
// stream's class: a star mints the chain of each class it has a bucket
// set for when it first starts (its head in the metastore), and a star
// without one could not open the stream, nor move it on. It reads the
// metastore only: the old star does not know its peers' configuration.
func (s *Server) targetHasClass(ctx context.Context, st metastore.Stream, to string) error {
	_, err := s.cfg.Meta.GetHead(ctx, metastore.ChainID{Star: to, Class: st.Class})
	if errors.Is(err, metastore.ErrNotFound) {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: stream %q is of class %s, and star %s has no %s chain (it never started with that class's bucket set); nothing was written", ErrMoveRefused, st.Name, st.Class, to, st.Class))
	}
	if err != nil {
		return toConnect(fmt.Errorf("move stream %q: look up star %s's %s chain: %w", st.Name, to, st.Class, err))
	}
	return nil
}

// fresh reads the stream from the metastore (not the leader cache).
func (s *Server) fresh(ctx context.Context, name string) (metastore.Stream, error) {
	st, err := s.cfg.Meta.GetStream(ctx, name)
	if errors.Is(err, metastore.ErrNotFound) || err == nil && st.State != metastore.StreamActive {
		return st, connect.NewError(connect.CodeNotFound, fmt.Errorf("stream %q does not exist", name))
	}
	if err != nil {
		return st, toConnect(fmt.Errorf("look up stream %q: %w", name, err))
	}
	return st, nil
}

// stars lists the star ids the server knows, sorted.
func (s *Server) stars() []string {
	out := []string{s.cfg.Star.ID()}
	for id := range s.cfg.Peers {
		if id != s.cfg.Star.ID() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// movedAway refuses an open of a stream this server moved away after the
// open's metastore read began (gen: the value of moves then): the read
// may predate the move's write. An open whose read began after it found
// the stream led here again (moved back) and clears the mark. Called with
// s.mu.
func (s *Server) movedAway(st metastore.Stream, id format.StreamID, gen uint64) error {
	m, ok := s.moved[id]
	if !ok {
		return nil
	}
	if m.gen > gen {
		return s.notLeader(m.to, fmt.Errorf("stream %q moved to %s", st.Name, m.to))
	}
	delete(s.moved, id)
	return nil
}

// movedInterceptor answers a star.MovedError (a batch for a stream sealed
// for a move) with the new leader in a Leader detail, so that clients
// retry there.
type movedInterceptor struct{ s *Server }

func (i movedInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		return res, i.s.movedErr(err)
	}
}

func (i movedInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i movedInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return i.s.movedErr(next(ctx, conn))
	}
}

func (s *Server) movedErr(err error) error {
	var me *star.MovedError
	if !errors.As(err, &me) {
		return err
	}
	if _, has := leaderDetail(err); has {
		return err
	}
	return s.notLeader(me.To, fmt.Errorf("the stream moved to star %s; retry there: %w", me.To, star.ErrMoved))
}

// leaderDetail returns err's Leader detail, if it has one.
func leaderDetail(err error) (*strandv1.Leader, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil, false
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if l, ok := v.(*strandv1.Leader); ok {
				return l, true
			}
		}
	}
	return nil, false
}
