package format

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Command records (fencing and explicit trim) are ordinary records of a
// stream, sequenced with its appends: each takes a seq. A command record
// has exactly one header, whose name is empty (a name no append may use:
// ValidateRecord refuses it) and whose value names the command; its body is
// the command's argument.
const (
	// CommandFence sets the stream's fencing token to the body (empty:
	// unfenced).
	CommandFence = "fence"
	// CommandTrim trims the stream below the seq in the body (8 bytes,
	// big-endian).
	CommandTrim = "trim"
	// CommandConfig sets the stream's configuration (retention and
	// timestamping) to the body (AppendConfig's 10 bytes); records after
	// it are judged by it.
	CommandConfig = "config"
	// MaxFenceTokenBytes bounds a fencing token.
	MaxFenceTokenBytes = 36
	// MovePrefix starts a seal token (ADR 0065): the command state of a
	// stream sealed for a move to another star. No client token may
	// start with it.
	MovePrefix = "\x00move\x00"
	// MaxMoveTarget bounds the star id a seal token names.
	MaxMoveTarget = MaxFenceTokenBytes - len(MovePrefix)
	// MaxSealTokenBytes bounds a seal token: MovePrefix, the target star
	// and, when the seal displaced a writer's fencing token, a zero byte
	// and that token (ADR 0065: a fenced stream moves with its token).
	MaxSealTokenBytes = len(MovePrefix) + MaxMoveTarget + 1 + MaxFenceTokenBytes
)

// SealToken is the token of a stream sealed for a move to star to, which
// displaced the fencing token displaced ("": the stream was not fenced).
func SealToken(to, displaced string) string {
	if displaced == "" {
		return MovePrefix + to
	}
	return MovePrefix + to + "\x00" + displaced
}

// ParseSeal returns the target star and the displaced fencing token of a
// seal token, and whether token is one at all. A star id holds no zero
// byte (it is printable ASCII), so the first one after the target ends it.
func ParseSeal(token string) (to, displaced string, ok bool) {
	rest, ok := strings.CutPrefix(token, MovePrefix)
	if !ok {
		return "", "", false
	}
	to, displaced, _ = strings.Cut(rest, "\x00")
	return to, displaced, true
}

// checkToken bounds a command state's token: a fencing token of at most
// MaxFenceTokenBytes, or a seal token whose parts respect their bounds.
func checkToken(t string) error {
	to, displaced, sealed := ParseSeal(t)
	switch {
	case !sealed && len(t) > MaxFenceTokenBytes:
		return fmt.Errorf("fencing token of %d bytes (at most %d): %w", len(t), MaxFenceTokenBytes, ErrMalformed)
	case sealed && (to == "" || len(to) > MaxMoveTarget || len(displaced) > MaxFenceTokenBytes):
		return fmt.Errorf("seal token naming a star id of %d bytes (1 to %d) and a displaced token of %d bytes (at most %d): %w", len(to), MaxMoveTarget, len(displaced), MaxFenceTokenBytes, ErrMalformed)
	}
	return nil
}

// FenceRecord is the command record that fences a stream to token.
func FenceRecord(token string) Record {
	return Record{Headers: []Header{{Name: []byte{}, Value: []byte(CommandFence)}}, Body: []byte(token)}
}

// TrimRecord is the command record that trims a stream below seq.
func TrimRecord(seq uint64) Record {
	return Record{Headers: []Header{{Name: []byte{}, Value: []byte(CommandTrim)}}, Body: binary.BigEndian.AppendUint64(nil, seq)}
}

// ConfigRecord is the command record that sets a stream's configuration.
func ConfigRecord(c StreamConfig) Record {
	return Record{Headers: []Header{{Name: []byte{}, Value: []byte(CommandConfig)}}, Body: AppendConfig(nil, c)}
}

// StreamConfig is a stream's configuration as a config command sets it.
type StreamConfig struct {
	// RetentionMs: settled data older than this is trimmed (0: kept).
	RetentionMs int64
	// TimestampMode is metastore.TimestampMode's value: 0 client-prefer, 1
	// client-require, 2 arrival.
	TimestampMode uint8
	// Uncapped lets a client timestamp be later than the arrival time.
	Uncapped bool
}

// MaxTimestampMode is the highest TimestampMode.
const MaxTimestampMode = 2

// configSize is AppendConfig's size: flags (bit 0 uncapped), mode,
// retention.
const configSize = 1 + 1 + 8

// AppendConfig appends c's encoding: flags (bit 0: uncapped), timestamp
// mode, retention ms (8 bytes).
func AppendConfig(b []byte, c StreamConfig) []byte {
	var flags byte
	if c.Uncapped {
		flags = 1
	}
	b = append(b, flags, c.TimestampMode)
	return binary.BigEndian.AppendUint64(b, uint64(c.RetentionMs))
}

// DecodeConfig decodes AppendConfig's form, which must fill b exactly.
func DecodeConfig(b []byte) (StreamConfig, error) {
	if len(b) != configSize {
		return StreamConfig{}, fmt.Errorf("stream config: %d bytes, want %d: %w", len(b), configSize, ErrMalformed)
	}
	c := StreamConfig{Uncapped: b[0] == 1, TimestampMode: b[1], RetentionMs: int64(binary.BigEndian.Uint64(b[2:]))}
	if b[0] > 1 || c.TimestampMode > MaxTimestampMode || c.RetentionMs < 0 {
		return StreamConfig{}, fmt.Errorf("stream config: flags %d, mode %d, retention %d: %w", b[0], c.TimestampMode, c.RetentionMs, ErrMalformed)
	}
	return c, nil
}

// CommandOf returns the command a record carries ("" for an ordinary
// record): a record is a command record if it has exactly one header and
// that header's name is empty.
func CommandOf(r Record) string {
	if len(r.Headers) != 1 || len(r.Headers[0].Name) != 0 {
		return ""
	}
	return string(r.Headers[0].Value)
}

// StreamCommands is a stream's command state: what its command records
// so far add up to. The zero value is a stream without commands.
type StreamCommands struct {
	// FenceToken is the current fencing token ("" when not fenced): an
	// append must carry it.
	FenceToken string
	// TrimSeq: every record below it is trimmed (0: none).
	TrimSeq uint64
	// HasConfig: a config command set Config; records after it are judged
	// by it (without one, the configuration the stream was created with).
	HasConfig bool
	Config    StreamConfig
}

// IsZero reports whether c is the state of a stream without commands.
func (c StreamCommands) IsZero() bool { return c == StreamCommands{} }

// Validate checks c's bounds.
func (c StreamCommands) Validate() error {
	if err := checkToken(c.FenceToken); err != nil {
		return err
	}
	if c.Config.TimestampMode > MaxTimestampMode || c.Config.RetentionMs < 0 || (!c.HasConfig && c.Config != StreamConfig{}) {
		return fmt.Errorf("stream config %+v (set: %t): %w", c.Config, c.HasConfig, ErrMalformed)
	}
	return nil
}

// commandsFixed is a command-state entry without its token: footer entry
// index (4), trim seq (8), token length (1), has-config (1), config (10).
// Frozen: part of format version 3.
const commandsFixed = 4 + 8 + 1 + 1 + configSize

// AppendCommands appends c's encoding (trim seq, token length, token,
// has-config, config): the form a command-state entry and a ref store.
func AppendCommands(b []byte, c StreamCommands) []byte {
	b = binary.BigEndian.AppendUint64(b, c.TrimSeq)
	b = append(b, byte(len(c.FenceToken)))
	b = append(b, c.FenceToken...)
	if !c.HasConfig {
		return AppendConfig(append(b, 0), StreamConfig{})
	}
	return AppendConfig(append(b, 1), c.Config)
}

// DecodeCommands decodes AppendCommands' form, which must fill b exactly.
func DecodeCommands(b []byte) (StreamCommands, error) {
	const fixed = commandsFixed - 4
	if len(b) < fixed {
		return StreamCommands{}, fmt.Errorf("command state: %d bytes: %w", len(b), ErrTruncated)
	}
	n := int(b[8])
	if n > MaxSealTokenBytes || len(b) != fixed+n {
		return StreamCommands{}, fmt.Errorf("command state: token of %d bytes in %d: %w", n, len(b), ErrMalformed)
	}
	c := StreamCommands{TrimSeq: binary.BigEndian.Uint64(b[0:8]), FenceToken: string(b[9 : 9+n])}
	rest := b[9+n:]
	if rest[0] > 1 {
		return StreamCommands{}, fmt.Errorf("command state: has-config byte %d: %w", rest[0], ErrMalformed)
	}
	cfg, err := DecodeConfig(rest[1:])
	if err != nil {
		return StreamCommands{}, fmt.Errorf("command state: %w", err)
	}
	c.HasConfig, c.Config = rest[0] == 1, cfg
	if err := c.Validate(); err != nil {
		return StreamCommands{}, fmt.Errorf("command state: %w", err)
	}
	return c, nil
}

// CommandEntry is one stream's command state in a version-3 flight: the
// state after the last record of the segment at footer entry Entry.
type CommandEntry struct {
	Entry    uint32
	Commands StreamCommands
}

// SetCommands records the command state of the open segment's stream as of
// the segment's last record. A flight with any command state is written as
// VersionCommands.
func (b *Builder) SetCommands(c StreamCommands) {
	if b.seg < 0 {
		panic("format: SetCommands without an open segment")
	}
	e := uint32(len(b.entries) - 1)
	if n := len(b.commands); n > 0 && b.commands[n-1].Entry == e {
		b.commands[n-1].Commands = c
		return
	}
	b.commands = append(b.commands, CommandEntry{Entry: e, Commands: c})
}

func appendCommandTable(b []byte, cs []CommandEntry) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(cs)))
	for _, c := range cs {
		b = binary.BigEndian.AppendUint32(b, c.Entry)
		b = AppendCommands(b, c.Commands)
	}
	return b
}

// parseCommandTable decodes the command table p (count and entries,
// nothing after): at least one entry, footer entry indexes strictly
// increasing and in range.
func parseCommandTable(p []byte, entries int) ([]CommandEntry, error) {
	out, rest, err := parseCommandTablePrefix(p, entries, false)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("command table: %d bytes after the last entry: %w", len(rest), ErrMalformed)
	}
	return out, nil
}

// parseCommandTablePrefix decodes the command table at the start of p and
// returns the bytes after it. An empty table (count 0) is allowed only
// when mayBeEmpty (a version-4 flight or version-3 pass index, whose
// carried table follows).
func parseCommandTablePrefix(p []byte, entries int, mayBeEmpty bool) ([]CommandEntry, []byte, error) {
	if len(p) < 4 {
		return nil, nil, fmt.Errorf("command table: %d bytes: %w", len(p), ErrTruncated)
	}
	n := binary.BigEndian.Uint32(p[0:4])
	if (n == 0 && !mayBeEmpty) || uint64(n)*commandsFixed > uint64(len(p)-4) {
		return nil, nil, fmt.Errorf("command table: %d entries in %d bytes: %w", n, len(p)-4, ErrMalformed)
	}
	if n == 0 {
		return nil, p[4:], nil
	}
	out := make([]CommandEntry, n)
	q := p[4:]
	for i := range out {
		if len(q) < commandsFixed {
			return nil, nil, fmt.Errorf("command entry %d: %d bytes left: %w", i, len(q), ErrTruncated)
		}
		size := commandsFixed + int(q[12]) // the token's length
		if len(q) < size {
			return nil, nil, fmt.Errorf("command entry %d: %d bytes left, needs %d: %w", i, len(q), size, ErrTruncated)
		}
		e := binary.BigEndian.Uint32(q[0:4])
		if e >= uint32(entries) || (i > 0 && e <= out[i-1].Entry) {
			return nil, nil, fmt.Errorf("command entry %d: segment %d of %d, not after the previous: %w", i, e, entries, ErrMalformed)
		}
		c, err := DecodeCommands(q[4:size])
		if err != nil {
			return nil, nil, fmt.Errorf("command entry %d: %w", i, err)
		}
		out[i] = CommandEntry{Entry: e, Commands: c}
		q = q[size:]
	}
	return out, q, nil
}
