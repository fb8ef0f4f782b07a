package star

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/strandlog/strand/shared/format"
)

// Moving a stream to another star (ADR 0065). The old star seals the
// stream: a fence command record whose token is the reserved move token
// naming the new star, admitted only if the stream is not fenced. Every
// batch sequenced after it is refused with ErrMoved. The sealed state
// travels in the command table of the stream's parts, so whoever recovers
// the stream recovers the seal: the new star unseals it when it opens it
// (Open), any other star keeps it sealed.

// MovePrefix starts every move token; no client fence may use it.
const MovePrefix = format.MovePrefix

// MaxMoveTarget bounds a target star id.
const MaxMoveTarget = format.MaxMoveTarget

// ErrMoved refuses a batch for a stream sealed for a move to another star
// (nothing written): retry at the new leader (MovedError.To).
var ErrMoved = errors.New("star: stream moved to another star")

// MovedError is ErrMoved with the star the stream moves to.
type MovedError struct {
	Stream format.StreamID
	To     string
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("%v: %s is led by star %s now (nothing written; retry there)", ErrMoved, e.Stream, e.To)
}

// Is makes errors.Is(err, ErrMoved) hold.
func (e *MovedError) Is(target error) bool { return target == ErrMoved }

// MoveToken is the body of the seal record of a move to star to, and the
// seal token of a stream that was not fenced (format.SealToken).
func MoveToken(to string) string { return format.SealToken(to, "") }

// MoveTarget returns the star a sealed stream's token names, and whether
// the token is a seal token at all.
func MoveTarget(token string) (string, bool) {
	to, _, ok := format.ParseSeal(token)
	return to, ok
}

// Sealed returns the star a command state is sealed to, if any.
func Sealed(c *format.StreamCommands) (string, bool) {
	if c == nil {
		return "", false
	}
	return MoveTarget(c.FenceToken)
}

// checkMoveTarget refuses a target star id that cannot travel in a token.
func checkMoveTarget(to string) error {
	switch {
	case to == "":
		return fmt.Errorf("%w: no target star", ErrBadCommand)
	case strings.IndexByte(to, 0) >= 0:
		return fmt.Errorf("%w: target star id %q holds a zero byte", ErrBadCommand, to)
	case len(to) > MaxMoveTarget:
		return fmt.Errorf("%w: target star id of %d bytes (a stream moves only to a star id of at most %d bytes)", ErrBadCommand, len(to), MaxMoveTarget)
	}
	return nil
}

// Seal commits the move command record of stream id for star to (ADR
// 0065) and returns its ack once durable: every batch of the stream
// sequenced before it is acknowledged before it, every one after it is
// refused with ErrMoved. A fenced stream's token travels in the seal
// token (format.SealToken), and the new star restores it when it
// unseals the stream: its writer keeps appending with it. A stream already
// sealed to the same star answers with no new record and the zero Ack
// (Drain then waits for the seal's ack); sealed to another star, with
// its *MovedError. The caller then drains the stream (Drain) and writes
// the new leader in the metastore.
func (s *Star) Seal(ctx context.Context, id format.StreamID, to string) (Ack, error) {
	if err := checkMoveTarget(to); err != nil {
		return Ack{}, err
	}
	if to == s.ID() {
		return Ack{}, fmt.Errorf("%w: stream %s is led by star %s already", ErrBadCommand, id, to)
	}
	a, _, err := s.command(ctx, id, format.FenceRecord(MoveToken(to)), &command{kind: format.CommandFence, sealTo: to}, AppendOptions{})
	var me *MovedError
	if errors.As(err, &me) && me.To == to {
		a, err = Ack{}, nil
	}
	if err == nil {
		s.mu.Lock()
		s.movedAway[id] = to
		s.mu.Unlock()
	}
	return a, err
}

// unseal makes a stream recovered sealed to this star appendable: its
// fencing token goes back to the one the seal displaced ("" if the
// stream was not fenced). Its next part carries the unsealed state.
// Called by Open, which opens a stream sealed to another star as it is
// (refusing every batch).
func (s *Star) unseal(c *format.StreamCommands) {
	if to, displaced, ok := format.ParseSeal(c.FenceToken); ok && to == s.ID() {
		c.FenceToken = displaced
	}
}

// unknown is the error for a stream not open here: *MovedError if Drain
// took it off sealed for a move, else ErrUnknownStream.
func (s *Star) unknown(id format.StreamID) error {
	s.mu.RLock()
	to, ok := s.movedAway[id]
	s.mu.RUnlock()
	if ok {
		return &MovedError{Stream: id, To: to}
	}
	return fmt.Errorf("%w: %s", ErrUnknownStream, id)
}
