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
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/strandlog/strand/shared/client"
)

type clientFlags struct {
	endpoint string
	token    string
	retryFor time.Duration
}

func (f *clientFlags) client() (*client.Client, error) {
	r := client.DefaultRetry
	r.MaxElapsed = f.retryFor
	if f.retryFor <= 0 {
		r.MaxAttempts = 1
	}
	return client.New(f.endpoint, client.WithToken(f.token), client.WithRetry(r))
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
	var pf producerFlags
	var file string
	var progress string
	cmd := &cobra.Command{
		Use:   "append NAME",
		Short: "Append lines of stdin (or a file) as records, one record per line",
		Long: `Append each line of the input (stdin, or --file) as one record, batched
(up to 1000 records and 1 MiB per batch) and pipelined over one append session.
It returns once every record is acknowledged as durable, and prints the range
of seqs appended. A progress bar shows on a terminal for inputs over 1 MiB.

Appends are exactly once: every batch carries a producer id and a batch seq,
and after a server restart, a takeover or a dropped connection the command
reconnects and resends what is unacknowledged; the server answers batches it
already has with their original acks. The producer is random unless
--producer-id names one; on exit the command prints the producer and its next
batch seq on stderr, so that a rerun with --producer-id and --batch-seq
resumes it (rerunning the same input from the same batch seq appends nothing
twice).`,
		Example: "  echo hello | strand append orders\n  strand append orders --file events.log\n  strand append orders --file part2.log --producer-id 6f1c...e2 --batch-seq 12",
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
			popt, err := pf.options(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			first, last, n, err := appendLines(cmd.Context(), c, args[0], in, popt, cmd.ErrOrStderr())
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
	pf.bind(cmd)
	return cmd
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

type printer struct {
	w      *bufio.Writer
	format string
}

func newPrinter(w io.Writer, format string) (*printer, error) {
	if format != "text" && format != "json" {
		return nil, fmt.Errorf("--format %q: want text or json", format)
	}
	return &printer{w: bufio.NewWriter(w), format: format}, nil
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
	return p.w.Flush()
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
			p, err := newPrinter(cmd.OutOrStdout(), format)
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			return session(cmd.Context(), c, args[0], start, client.SessionOptions{Count: count, NoTail: true}, p, cmd.ErrOrStderr())
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
			p, err := newPrinter(cmd.OutOrStdout(), format)
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
	if err := rs.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return ctx.Err()
}
