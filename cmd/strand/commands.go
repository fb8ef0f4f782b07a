package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/strandlog/strand/shared/client"
)

type clientFlags struct {
	endpoint  string
	token     string
	tokenFile string
	trust     []string // hosts a leader may be at besides the endpoint's
}

// bearer is the token to send: --token, else the contents of
// --token-file, else STRAND_TOKEN.
func (f *clientFlags) bearer() (string, error) {
	switch {
	case f.token != "":
		return f.token, nil
	case f.tokenFile != "":
		return readTokenFile(f.tokenFile)
	}
	return os.Getenv("STRAND_TOKEN"), nil
}

// readTokenFile reads a token from a file (surrounding space trimmed).
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", path)
	}
	return tok, nil
}

func (f *clientFlags) client() (*client.Client, error) {
	tok, err := f.bearer()
	if err != nil {
		return nil, err
	}
	return client.New(f.endpoint, client.WithToken(tok), client.WithTrustedLeaders(f.trust...))
}

func newCreate(cf *clientFlags) *cobra.Command {
	var class string
	var retention time.Duration
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a stream",
		Long: `Create a stream. Its class (standard or express) is fixed for life; its
retention (0: forever) bounds how long settled data is kept.`,
		Example: "  strand create orders\n  strand create clicks --class express --retention 72h",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			s, err := c.CreateStream(cmd.Context(), args[0], client.CreateOptions{Class: class, RetentionMs: retention.Milliseconds()})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s (%s, id %s, leader %s)\n", s.Name, s.Class, s.ID, s.Leader)
			return nil
		},
	}
	cmd.Flags().StringVar(&class, "class", "standard", "storage class: standard or express")
	cmd.Flags().DurationVar(&retention, "retention", 0, "keep settled data this long (e.g. 72h; 0 keeps forever)")
	return cmd
}

func newLs(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls [PREFIX]",
		Short:   "List streams (optionally those whose names start with PREFIX)",
		Example: "  strand ls\n  strand ls logs/",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			out := cmd.OutOrStdout()
			after := ""
			for {
				page, next, err := c.ListStreams(cmd.Context(), prefix, after, 1000)
				if err != nil {
					return err
				}
				for _, s := range page {
					if asJSON {
						b, _ := json.Marshal(s)
						fmt.Fprintln(out, string(b))
						continue
					}
					state := ""
					if s.Deleting {
						state = " (deleting)"
					}
					fmt.Fprintf(out, "%s\t%s\t%s%s\n", s.Name, s.Class, s.Leader, state)
				}
				if next == "" {
					return nil
				}
				after = next
			}
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per stream")
	return cmd
}

func newRm(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a stream (its data is removed in the background)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if err := c.DeleteStream(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
}

func newCheckTail(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check-tail NAME",
		Short: "Print a stream's tail: the next seq and the last record's timestamp",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			t, err := c.CheckTail(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				fmt.Fprintf(cmd.OutOrStdout(), "{\"next_seq_num\":%d,\"last_timestamp_ms\":%d}\n", t.NextSeq, t.LastTsMs)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "next_seq_num %d\nlast_timestamp_ms %d\n", t.NextSeq, t.LastTsMs)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// batcher groups lines into batches within the API's limits.
type batcher struct {
	recs  []client.Record
	bytes int
}

const (
	maxBatchRecords = 1000
	maxBatchBytes   = 1<<20 - 64<<10 // leave room for the encoding overhead
)

func newAppend(cf *clientFlags) *cobra.Command {
	var file string
	var progress string
	cmd := &cobra.Command{
		Use:   "append NAME",
		Short: "Append lines of stdin (or a file) as records, one record per line",
		Long: `Append each line of the input (stdin, or --file) as one record, batched
(up to 1000 records and 1 MiB per batch) and pipelined over one append session.
It returns once every record is acknowledged as durable, and prints the range
of seqs appended. A progress bar shows on a terminal for inputs over 1 MiB.`,
		Example: "  echo hello | strand append orders\n  strand append orders --file events.log",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var in io.Reader = cmd.InOrStdin()
			size := int64(-1)
			if file != "" {
				f, err := os.Open(file)
				if err != nil {
					return fmt.Errorf("open input: %w", err)
				}
				defer f.Close()
				if fi, err := f.Stat(); err == nil {
					size = fi.Size()
				}
				in = f
			}
			show := progress == "on" || (progress == "auto" && term.IsTerminal(int(os.Stderr.Fd())) && (size < 0 || size > 1<<20))
			if show {
				bar := progressbar.DefaultBytes(size, "appending")
				defer bar.Finish()
				in = io.TeeReader(in, bar)
			}
			first, last, n, err := appendLines(cmd.Context(), c, args[0], in)
			if err != nil {
				return err
			}
			if n == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "nothing to append: the input is empty")
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "appended %d records to %s (seqs %d..%d)\n", n, args[0], first, last)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "read lines from this file instead of stdin")
	cmd.Flags().StringVar(&progress, "progress", "auto", "progress bar: auto (on a terminal, for inputs over 1 MiB), on or off")
	return cmd
}

// appendLines appends each line of in as a record through one session, and
// waits for every ack.
func appendLines(ctx context.Context, c *client.Client, stream string, in io.Reader) (first, last uint64, n int, err error) {
	sess, err := c.OpenAppendSession(ctx, stream)
	if err != nil {
		return 0, 0, 0, err
	}
	defer sess.Close()
	sent := 0
	done := make(chan error, 1)
	var acked int
	go func() {
		for a := range sess.Acks() {
			if a.Err != nil {
				done <- a.Err
				return
			}
			if acked == 0 {
				first = a.StartSeq
			}
			last = a.EndSeq - 1
			acked += int(a.EndSeq - a.StartSeq)
		}
		done <- nil
	}()
	var b batcher
	flush := func() error {
		if len(b.recs) == 0 {
			return nil
		}
		if err := sess.Submit(b.recs, client.AppendOptions{}); err != nil {
			return err
		}
		sent += len(b.recs)
		b = batcher{}
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxBatchBytes)
	for sc.Scan() {
		line := []byte(sc.Text())
		if len(b.recs) == maxBatchRecords || b.bytes+len(line)+32 > maxBatchBytes {
			if err := flush(); err != nil {
				break
			}
		}
		b.recs = append(b.recs, client.Record{Body: line})
		b.bytes += len(line) + 32
	}
	if err := sc.Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("read input: %w (lines are limited to about 1 MiB)", err)
	}
	_ = flush()
	_ = sess.CloseSend()
	if err := <-done; err != nil {
		return first, last, acked, fmt.Errorf("after %d of %d records were acknowledged: %w", acked, sent, err)
	}
	if acked != sent {
		return first, last, acked, fmt.Errorf("only %d of %d records were acknowledged; the rest may or may not be appended: check with strand check-tail", acked, sent)
	}
	return first, last, acked, nil
}

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
}

// printBuffer is the printer's buffer size.
const printBuffer = 256 << 10

func newPrinter(w io.Writer, format string, flushEach bool) (*printer, error) {
	if format != "text" && format != "json" {
		return nil, fmt.Errorf("--format %q: want text or json", format)
	}
	return &printer{w: bufio.NewWriterSize(w, printBuffer), format: format, flushEach: flushEach}, nil
}

type jsonHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type jsonRecord struct {
	Seq        uint64       `json:"seq_num"`
	Timestamp  int64        `json:"timestamp_ms"`
	Headers    []jsonHeader `json:"headers,omitempty"`
	Body       *string      `json:"body,omitempty"`
	BodyBase64 *string      `json:"body_base64,omitempty"`
}

func (p *printer) print(recs []client.Record) error {
	for _, r := range recs {
		if p.format == "text" {
			p.w.Write(r.Body)
			p.w.WriteByte('\n')
			continue
		}
		j := jsonRecord{Seq: r.Seq, Timestamp: r.TimestampMs}
		for _, h := range r.Headers {
			j.Headers = append(j.Headers, jsonHeader{Name: string(h.Name), Value: string(h.Value)})
		}
		if utf8.Valid(r.Body) {
			s := string(r.Body)
			j.Body = &s
		} else {
			s := base64.StdEncoding.EncodeToString(r.Body)
			j.BodyBase64 = &s
		}
		b, _ := json.Marshal(j)
		p.w.Write(b)
		p.w.WriteByte('\n')
	}
	if p.flushEach {
		return p.w.Flush()
	}
	return nil
}

func newRead(cf *clientFlags) *cobra.Command {
	var sf startFlags
	var count uint64
	var format string
	cmd := &cobra.Command{
		Use:   "read NAME",
		Short: "Print a stream's records from a start up to the tail",
		Long: `Print records from a start (default: seq 0) up to the stream's tail at the
time of the read, or --count records. Text prints each body on a line; json
prints one JSON object per record (seq_num, timestamp_ms, headers, body, or
body_base64 when the body is not UTF-8).`,
		Example: "  strand read orders\n  strand read orders --seq 100 --count 10 --format json\n  strand read orders --tail-offset 5",
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
			return session(cmd.Context(), c, args[0], start, client.SessionOptions{Count: count, NoTail: true}, p)
		},
	}
	sf.bind(cmd, "")
	cmd.Flags().Uint64VarP(&count, "count", "n", 0, "print at most this many records (0: up to the tail)")
	cmd.Flags().StringVar(&format, "format", "text", "output: text (bodies) or json (JSON lines)")
	return cmd
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
			err = session(cmd.Context(), c, args[0], start, client.SessionOptions{Count: count}, p)
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

func session(ctx context.Context, c *client.Client, name string, start client.Start, opt client.SessionOptions, p *printer) error {
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
	// What was read is written out even when the session then failed.
	if err := p.w.Flush(); err != nil {
		return err
	}
	if err := rs.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return ctx.Err()
}
