package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/rawjson"
)

// startFlags are the read start options shared by read and tail.
type startFlags struct {
	seq, tailOffset string
	timestamp       string
}

func (s *startFlags) bind(cmd *cobra.Command, defTail string) {
	cmd.Flags().StringVar(&s.seq, "seq", "", "start at this seq number")
	cmd.Flags().StringVar(&s.timestamp, "timestamp", "", "start at the first record with timestamp >= this (ms since the epoch, or RFC 3339)")
	cmd.Flags().StringVar(&s.tailOffset, "tail-offset", defTail, "start this many records before the tail")
	cmd.MarkFlagsMutuallyExclusive("seq", "timestamp", "tail-offset")
}

func (s *startFlags) start(def client.Start) (client.Start, error) {
	switch {
	case s.seq != "":
		v, err := strconv.ParseUint(s.seq, 10, 64)
		if err != nil {
			return def, fmt.Errorf("--seq %q: want a non-negative integer", s.seq)
		}
		return client.FromSeq(v), nil
	case s.timestamp != "":
		if v, err := strconv.ParseInt(s.timestamp, 10, 64); err == nil && v >= 0 {
			return client.FromTimestamp(v), nil
		}
		t, err := time.Parse(time.RFC3339, s.timestamp)
		if err != nil {
			return def, fmt.Errorf("--timestamp %q: want milliseconds since the epoch or RFC 3339 (2024-01-02T15:04:05Z)", s.timestamp)
		}
		return client.FromTimestamp(t.UnixMilli()), nil
	case s.tailOffset != "":
		v, err := strconv.ParseUint(s.tailOffset, 10, 64)
		if err != nil {
			return def, fmt.Errorf("--tail-offset %q: want a non-negative integer", s.tailOffset)
		}
		return client.FromTail(v), nil
	}
	return def, nil
}

// printer writes records through one large buffer: a batch of small
// records costs a few writes, not one per record. A follower (tail)
// flushes after every batch; a reader (read) only when the buffer fills
// and at the end.
type printer struct {
	w         *bufio.Writer
	format    string
	flushEach bool
	bar       *progressbar.ProgressBar // nil: none
}

// printBuffer is the printer's buffer size.
const printBuffer = 256 << 10

func newPrinter(w io.Writer, format string, flushEach bool) (*printer, error) {
	if format != "text" && format != "json" {
		return nil, fmt.Errorf("--format %q: want text or json", format)
	}
	return &printer{w: bufio.NewWriterSize(w, printBuffer), format: format, flushEach: flushEach}, nil
}

// print writes recs: text, each body on a line (command records, such as
// a fence or a trim, are left out: their bodies are not lines of data); or
// json, each record as one line of raw JSON (shared/rawjson), the shape
// the API answers with Strand-Format: raw, command records included.
func (p *printer) print(recs []client.Record) error {
	for _, r := range recs {
		if p.format == "text" {
			if isCommand(r) {
				continue
			}
			p.w.Write(r.Body)
			p.w.WriteByte('\n')
			continue
		}
		m := &strandv1.SequencedRecord{SeqNum: r.Seq, TimestampMs: r.TimestampMs, Body: r.Body}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, &strandv1.Header{Name: h.Name, Value: h.Value})
		}
		b, err := rawjson.Marshal(m)
		if err != nil {
			return err
		}
		p.w.Write(b)
		p.w.WriteByte('\n')
	}
	if p.bar != nil {
		_ = p.bar.Add(len(recs))
	}
	if p.flushEach {
		return p.w.Flush()
	}
	return nil
}

func newRead(cf *clientFlags) *cobra.Command {
	var sf startFlags
	var count uint64
	var format, progress string
	cmd := &cobra.Command{
		Use:   "read NAME",
		Short: "Print a stream's records from a start up to the tail",
		Long: `Print records from a start (default: seq 0) up to the stream's tail at the
time of the read, or --count records. Text prints each body on a line; json
prints one JSON object per record, every field present:
{"seqNum":0,"timestampMs":1700000000000,"headers":[{"name":"k","value":"v"}],"body":"first"}
(bodyBase64, valueBase64, nameBase64 instead when the bytes are not UTF-8;
the API answers the same with Strand-Format: raw; see docs/cli.md). A progress
bar (records) shows on stderr when it is a terminal, stdout is not, and the
read is over 10,000 records.`,
		Example: "  strand read orders\n  strand read orders --seq 100 --count 10 --format json\n  strand read orders --tail-offset 5\n  strand read orders > orders.txt",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start, err := sf.start(client.FromSeq(0))
			if err != nil {
				return err
			}
			p, err := newPrinter(cmd.OutOrStdout(), format, false)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			if err := p.progress(cmd.Context(), c, args[0], progress, sf, count, cmd.ErrOrStderr()); err != nil {
				return err
			}
			return session(cmd.Context(), c, args[0], start, client.SessionOptions{Count: count, NoTail: true}, p, cmd.ErrOrStderr())
		},
	}
	sf.bind(cmd, "")
	cmd.Flags().Uint64VarP(&count, "count", "n", 0, "print at most this many records (0: up to the tail)")
	cmd.Flags().StringVar(&format, "format", "text", "output: text (bodies) or json (JSON lines)")
	cmd.Flags().StringVar(&progress, "progress", "auto", "progress bar: auto (stderr a terminal, stdout not, over 10,000 records), on or off")
	return cmd
}

// checkProgress refuses a --progress that is not auto, on or off.
func checkProgress(mode string) error {
	switch mode {
	case "auto", "on", "off":
		return nil
	}
	return fmt.Errorf("--progress %q: want auto, on or off", mode)
}

// readTotal is how many records a read from sf's start to the tail gets
// (-1: unknown, a --timestamp start). sf was validated (startFlags.start).
func readTotal(st client.State, sf startFlags) int64 {
	first := st.TrimSeq // --seq below the trim point starts at it
	switch {
	case sf.timestamp != "":
		return -1
	case sf.tailOffset != "":
		n, _ := strconv.ParseUint(sf.tailOffset, 10, 64)
		first = max(first, st.NextSeq-min(n, st.NextSeq))
	case sf.seq != "":
		n, _ := strconv.ParseUint(sf.seq, 10, 64)
		first = max(first, n)
	}
	return int64(st.NextSeq - min(first, st.NextSeq))
}

// readBar is the least number of records for which read shows a progress
// bar by itself.
const readBar = 10_000

// progress gives p a progress bar (in records, on stderr) when mode asks
// for one: on, or auto when stderr is a terminal and stdout is not and
// the read is over readBar records. The total comes from the stream's
// tail and trim point (unknown for a --timestamp start: a spinner).
func (p *printer) progress(ctx context.Context, c *client.Client, name, mode string, sf startFlags, count uint64, stderr io.Writer) error {
	if err := checkProgress(mode); err != nil || mode == "off" {
		return err
	}
	if mode == "auto" && (!term.IsTerminal(int(os.Stderr.Fd())) || term.IsTerminal(int(os.Stdout.Fd()))) {
		return nil
	}
	st, err := c.State(ctx, name)
	if err != nil {
		return err
	}
	total := readTotal(st, sf)

	if count > 0 && (total < 0 || uint64(total) > count) {
		total = int64(count)
	}
	if mode == "auto" && total >= 0 && total < readBar {
		return nil
	}
	p.bar = progressbar.NewOptions64(total, progressbar.OptionSetDescription("reading"), progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetWidth(10), progressbar.OptionThrottle(65*time.Millisecond), progressbar.OptionShowCount(),
		progressbar.OptionShowIts(), progressbar.OptionSetItsString("records"), progressbar.OptionFullWidth(), progressbar.OptionSpinnerType(14),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(stderr) }))
	return nil
}

func newTail(cf *clientFlags) *cobra.Command {
	var sf startFlags
	var count uint64
	var format string
	cmd := &cobra.Command{
		Use:   "tail NAME",
		Short: "Follow a stream: print new records as they are acknowledged",
		Long: `Print the last records of a stream (--tail-offset, default 10) and then every
new record as it is acknowledged, until interrupted (Ctrl-C) or --count records.`,
		Example: "  strand tail orders\n  strand tail orders --tail-offset 0 --format json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start, err := sf.start(client.FromTail(10))
			if err != nil {
				return err
			}
			p, err := newPrinter(cmd.OutOrStdout(), format, true)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			err = session(cmd.Context(), c, args[0], start, client.SessionOptions{Count: count}, p, cmd.ErrOrStderr())
			if errors.Is(err, context.Canceled) || cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	sf.bind(cmd, "10")
	cmd.Flags().Uint64VarP(&count, "count", "n", 0, "stop after this many records (0: never)")
	cmd.Flags().StringVar(&format, "format", "text", "output: text (bodies) or json (JSON lines)")
	return cmd
}

func session(ctx context.Context, c *client.Client, name string, start client.Start, opt client.SessionOptions, p *printer, stderr io.Writer) error {
	opt.OnResume = func(from uint64, cause error) {
		fmt.Fprintf(stderr, "strand: connection lost (%v); resuming at seq %d\n", cause, from)
	}
	rs, err := c.OpenReadSession(ctx, name, start, opt)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		if err := p.print(rs.Batch().Records); err != nil {
			return err
		}
	}
	if p.bar != nil {
		_ = p.bar.Finish()
	}
	// What was read is written out even when the session then failed.
	if err := p.w.Flush(); err != nil {
		return err
	}
	if err := rs.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return ctx.Err()
}
