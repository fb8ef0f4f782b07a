package star

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/format"
)

// Commands (fencing and explicit trim): see doc.go.

// ErrFenced refuses an append (or trim) whose fencing token is not the
// stream's current one, or a fence whose expected current token is not.
// Not retriable: the same request gets the same answer until the stream's
// fence changes.
var ErrFenced = errors.New("star: fencing token mismatch")

// ErrBadCommand refuses a malformed command (a fencing token over
// format.MaxFenceTokenBytes). Nothing is written.
var ErrBadCommand = errors.New("star: invalid command")

// command is what a command batch does when it is sequenced.
type command struct {
	kind string // format.CommandFence or format.CommandTrim
	// fence: the new token, and the current token the caller expects (nil:
	// any).
	token   string
	ifToken *string
	// sealTo: a move's seal (move.go): the token becomes the seal token
	// naming sealTo and the token it displaces, whatever that is.
	sealTo string
	// trim: records below trimTo are trimmed (capped to the command
	// record's own seq).
	trimTo uint64
	// config: the change to the stream's configuration.
	patch ConfigPatch
}

// ConfigPatch is a change to a stream's configuration: the fields set
// replace the stream's current ones, the others are kept.
type ConfigPatch struct {
	RetentionMs   *int64
	TimestampMode *uint8
	Uncapped      *bool
}

// apply returns c changed by p.
func (p ConfigPatch) apply(c format.StreamConfig) format.StreamConfig {
	if p.RetentionMs != nil {
		c.RetentionMs = *p.RetentionMs
	}
	if p.TimestampMode != nil {
		c.TimestampMode = *p.TimestampMode
	}
	if p.Uncapped != nil {
		c.Uncapped = *p.Uncapped
	}
	return c
}

// validate checks p's values.
func (p ConfigPatch) validate() error {
	if p.RetentionMs != nil && *p.RetentionMs < 0 {
		return fmt.Errorf("%w: retention %d ms is negative (0 keeps forever)", ErrBadCommand, *p.RetentionMs)
	}
	if p.TimestampMode != nil && *p.TimestampMode > format.MaxTimestampMode {
		return fmt.Errorf("%w: unknown timestamp mode %d", ErrBadCommand, *p.TimestampMode)
	}
	return nil
}

// checkFence refuses b unless its fencing token (for a fence command: the
// current token it expects, if any) is the stream's current one. Called
// with l.mu held, in the same critical section as b's sequencing.
func (st *stream) checkFence(b *batch) error {
	cur := st.cmds.FenceToken
	if to, ok := MoveTarget(cur); ok {
		// Sealed for a move (move.go): nothing more is admitted here.
		return &MovedError{Stream: st.id, To: to}
	}
	if b.cmd != nil && b.cmd.kind == format.CommandConfig {
		return nil // an admin's reconfiguration, not a writer's
	}
	if b.cmd != nil && b.cmd.kind == format.CommandFence {
		if b.cmd.ifToken != nil && *b.cmd.ifToken != cur {
			return fmt.Errorf("%w: the fence expects the current token %s, but the stream is %s (nothing written)", ErrFenced, describeToken(*b.cmd.ifToken), describeCurrent(cur))
		}
		return nil
	}
	if b.fenceToken != cur {
		return fmt.Errorf("%w: the append carries %s, but the stream is %s (nothing written)", ErrFenced, describeToken(b.fenceToken), describeCurrent(cur))
	}
	return nil
}

func describeToken(t string) string {
	if t == "" {
		return "no fencing token"
	}
	return fmt.Sprintf("fencing token %q", t)
}

// describeCurrent names the stream's fence without revealing its token.
func describeCurrent(t string) string {
	if t == "" {
		return "not fenced"
	}
	return "fenced to another token"
}

// apply makes b's command (if any) the stream's state and snapshots the
// state on b for its flight's command table. Called with l.mu held, right
// after b got its seqs.
func (st *stream) apply(b *batch) {
	if c := b.cmd; c != nil {
		switch c.kind {
		case format.CommandFence:
			if c.sealTo != "" {
				st.cmds.FenceToken = format.SealToken(c.sealTo, st.cmds.FenceToken)
			} else {
				st.cmds.FenceToken = c.token
			}
		case format.CommandTrim:
			st.cmds.TrimSeq = max(st.cmds.TrimSeq, min(c.trimTo, b.first))
		case format.CommandConfig:
			// The record's body becomes the full new configuration (its
			// last bytes: the body ends the encoded record).
			st.cfg = c.patch.apply(st.cfg)
			st.cmds.HasConfig, st.cmds.Config = true, st.cfg
			body := format.AppendConfig(nil, st.cfg)
			copy(b.enc[len(b.enc)-len(body):], body)
		}
		st.hasCmds = true
	}
	if st.hasCmds {
		b.cmds, b.hasCmds = st.cmds, true
	}
}

// Fence fences the stream to token (empty: unfences it): a command record
// sequenced with the appends (it takes a seq; format.FenceRecord). Every
// append sequenced after it must carry token, every one before it was
// checked against the previous token. ifToken, if set, must be the current
// token, or the fence is refused with ErrFenced; match, if set, is
// match_seq_num. It returns the command record's ack once durable.
func (s *Star) Fence(ctx context.Context, id format.StreamID, token string, ifToken *string, match *uint64) (Ack, error) {
	if len(token) > format.MaxFenceTokenBytes {
		return Ack{}, fmt.Errorf("%w: fencing token of %d bytes (at most %d)", ErrBadCommand, len(token), format.MaxFenceTokenBytes)
	}
	if _, ok := MoveTarget(token); ok {
		return Ack{}, fmt.Errorf("%w: a fencing token may not start with the reserved move prefix %q", ErrBadCommand, MovePrefix)
	}
	a, _, err := s.command(ctx, id, format.FenceRecord(token), &command{kind: format.CommandFence, token: token, ifToken: ifToken}, AppendOptions{MatchSeq: match})
	return a, err
}

// Trim trims the stream below seq: a command record sequenced with the
// appends (format.TrimRecord). A trim point past the command record's own
// seq trims up to it; the trim point never moves backward. opt carries the
// fencing token (a fenced stream's trim must carry it) and match_seq_num.
// It returns the command record's ack and the stream's trim point after it,
// once durable; reads honour the trim from then (Star.Commands), and trim
// removes the records later.
func (s *Star) Trim(ctx context.Context, id format.StreamID, seq uint64, opt AppendOptions) (Ack, uint64, error) {
	opt.Producer = format.ProducerID{}
	a, cmds, err := s.command(ctx, id, format.TrimRecord(seq), &command{kind: format.CommandTrim, trimTo: seq}, opt)
	return a, cmds.TrimSeq, err
}

// Reconfigure changes the stream's configuration (retention,
// timestamping) by patch: a config command record sequenced with the
// appends (format.ConfigRecord, its body the full new configuration).
// Records before it were judged by the old configuration, every record
// after it by the new one; a fencing token is not needed. It returns the
// command record's ack and the configuration after it, once durable.
func (s *Star) Reconfigure(ctx context.Context, id format.StreamID, patch ConfigPatch) (Ack, format.StreamConfig, error) {
	if err := patch.validate(); err != nil {
		return Ack{}, format.StreamConfig{}, err
	}
	a, cmds, err := s.command(ctx, id, format.ConfigRecord(format.StreamConfig{}), &command{kind: format.CommandConfig, patch: patch}, AppendOptions{})
	return a, cmds.Config, err
}

// command admits one command record and waits for its ack; it returns the
// stream's command state after it.
func (s *Star) command(ctx context.Context, id format.StreamID, rec format.Record, c *command, opt AppendOptions) (Ack, format.StreamCommands, error) {
	st, err := s.stream(id)
	if err != nil {
		return Ack{}, format.StreamCommands{}, err
	}
	p := &Pending{}
	p.b = &p.inner
	b := p.b
	b.init(st, []format.Record{rec}, format.EncodedSize(rec))
	b.cmd, b.fenceToken = c, opt.FenceToken
	if _, err := st.l.admit(ctx, b, opt.MatchSeq); err != nil {
		return Ack{}, format.StreamCommands{}, err
	}
	a, err := p.Wait(ctx)
	return a, b.cmds, err // b.cmds was set at admission
}

// Commands returns a stream's acknowledged command state: what the command
// records up to its acknowledged tail add up to. Reads honour its trim
// point at once.
func (s *Star) Commands(id format.StreamID) (format.StreamCommands, error) {
	s.mu.RLock()
	st := s.streams[id]
	s.mu.RUnlock()
	if st == nil {
		return format.StreamCommands{}, s.unknown(id)
	}
	st.l.mu.Lock()
	defer st.l.mu.Unlock()
	return st.ackedCmds, nil
}
