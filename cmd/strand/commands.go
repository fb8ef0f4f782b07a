package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/rawjson"
)

type clientFlags struct {
	endpoint  string
	token     string
	tokenFile string
	trust     []string // hosts a leader may be at besides the endpoint's
	retryFor  time.Duration
	sets      []*pflag.FlagSet // where register bound the flags
}

// bearer is the token to send: --token, else the contents of
// --token-file, else STRAND_TOKEN.
func (f *clientFlags) bearer() (string, error) {
	tok, from := os.Getenv("STRAND_TOKEN"), "STRAND_TOKEN"
	switch {
	case f.token != "":
		tok, from = f.token, "--token"
	case f.tokenFile != "":
		var err error
		if tok, err = readTokenFile(f.tokenFile); err != nil {
			return "", err
		}
		from = "--token-file " + f.tokenFile
	}
	if tok != "" && !auth.WellFormed(tok) {
		return "", malformedToken(from, tok)
	}
	return tok, nil
}

// malformedToken says why the token from a source is not one, without
// printing it.
func malformedToken(from, tok string) error {
	why := fmt.Sprintf("it is %d characters", len(tok))
	if n := strings.Count(tok, "\n") + 1; n > 1 {
		why = fmt.Sprintf("it has %d lines", n)
	} else if !strings.HasPrefix(tok, auth.TokenPrefix) {
		why = "it does not start with " + auth.TokenPrefix
	}
	return fmt.Errorf("the token from %s is malformed: %s; a token is %s followed by 52 base32 characters, on one line", from, why, auth.TokenPrefix)
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
	opts := []client.Option{client.WithToken(tok), client.WithTrustedLeaders(f.trust...)}
	// Without --retry-for the client's default budget (the flag's default)
	// applies, which fails at once against a server never reached (a
	// stopped strand dev, a wrong --endpoint); --retry-for given also
	// waits that long for a server that is still starting.
	if f.retrySet() {
		r := client.DefaultRetry
		r.MaxElapsed = f.retryFor
		if f.retryFor <= 0 {
			r.MaxAttempts = 1
		}
		opts = append(opts, client.WithRetry(r))
	}
	return client.New(f.endpoint, opts...)
}

// retrySet reports whether --retry-for was given.
func (f *clientFlags) retrySet() bool {
	for _, fs := range f.sets {
		if fl := fs.Lookup("retry-for"); fl != nil && fl.Changed {
			return true
		}
	}
	return false
}

func newCreate(cf *clientFlags) *cobra.Command {
	var class, stamping string
	var retention time.Duration
	var uncapped bool
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a stream",
		Long: `Create a stream. Its class (standard or express) is fixed for life; its
retention (0: forever) bounds how long settled data is kept.

--timestamping says where records' timestamps come from: client-prefer (the
record's timestamp when it has one, else the arrival time; the default),
client-require (every record must have one) or arrival (the arrival time,
always). A client timestamp later than the arrival time becomes the arrival
time unless --uncapped. A stream's timestamps never decrease.`,
		Example: "  strand create orders\n  strand create clicks --class express --retention 72h\n  strand create sensor --timestamping client-require",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			s, err := c.CreateStream(cmd.Context(), args[0], client.CreateOptions{Class: class, RetentionMs: retention.Milliseconds(),
				Timestamping: stamping, Uncapped: uncapped})
			if err != nil {
				return err
			}
			capped := "capped"
			if s.Uncapped {
				capped = "uncapped"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s (%s, id %s, leader %s, timestamps %s, %s)\n", s.Name, s.Class, s.ID, s.Leader, s.Timestamping, capped)
			return nil
		},
	}
	cmd.Flags().StringVar(&class, "class", "standard", "storage class: standard or express")
	cmd.Flags().DurationVar(&retention, "retention", 0, "keep settled data this long (e.g. 72h; 0 keeps forever)")
	cmd.Flags().StringVar(&stamping, "timestamping", "client-prefer", "where timestamps come from: client-prefer, client-require or arrival")
	cmd.Flags().BoolVar(&uncapped, "uncapped", false, "keep client timestamps later than the arrival time (default: capped to it)")
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
						if err := printRaw(out, streamMsg(s)); err != nil {
							return err
						}
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
		Long: `Print a stream's tail: nextSeqNum (the seq the next record gets),
lastTimestampMs (the last record's timestamp, 0: none), trimSeqNum (the trim
point) and fenced, one "name value" per line, or with --json the API's
CheckTailResponse with the same field names.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			st, err := c.State(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			m := tailMsg(st)
			if asJSON {
				return printRaw(cmd.OutOrStdout(), m)
			}
			return printFields(cmd.OutOrStdout(), m)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// tailMsg is st as the API's CheckTailResponse.
func tailMsg(st client.State) *strandv1.CheckTailResponse {
	return &strandv1.CheckTailResponse{NextSeqNum: st.NextSeq, LastTimestampMs: st.LastTsMs, TrimSeqNum: st.TrimSeq, Fenced: st.Fenced}
}

// printFields prints rows ("name\tvalue" lines) and then m's fields as
// "name value" lines, aligned, with the names its JSON has (the text and
// the --json output name a field alike).
func printFields(w io.Writer, m proto.Message, rows ...string) error {
	b, err := rawjson.Marshal(m)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	fds := m.ProtoReflect().Descriptor().Fields()
	for i := range fds.Len() {
		name := fds.Get(i).JSONName()
		v, ok := fields[name]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, strings.Trim(string(v), `"`))
	}
	return tw.Flush()
}

// batcher groups records into batches within the API's limits.
type batcher struct {
	recs    []client.Record
	bytes   int // metered
	headers int
}

const (
	maxBatchRecords = format.MaxBatchRecords
	maxBatchBytes   = format.MaxBatchMeteredBytes
	maxBatchHeaders = format.MaxBatchHeaders
)

func newAppend(cf *clientFlags) *cobra.Command {
	var pf producerFlags
	var file, progress, inFormat, timestamp string
	var headers []string
	cmd := &cobra.Command{
		Use:   "append NAME",
		Short: "Append lines of stdin (or a file) as records, one record per line",
		Long: `Append each line of the input (stdin, or --file) as one record, batched
(up to 1000 records and 1 MiB per batch) and pipelined over one append session.
It returns once every record is acknowledged as durable, and prints the range
of seqs appended. A progress bar shows on a terminal for inputs over 1 MiB.

--header NAME=VALUE (repeatable) adds a header to every record; --timestamp
(milliseconds since the epoch, or RFC 3339) gives every record that
timestamp (a client-require stream needs one). With --format json each line
is one record as JSON, the shape strand read --format json prints:
{"body":"...","headers":[{"name":"k","value":"v"}],"timestampMs":1700000000000}
(bodyBase64 for bytes that are not text; seqNum is ignored), so a read's
output appends as it is.

Appends are exactly once: every batch carries a producer id and a batch seq,
and after a server restart, a takeover or a dropped connection the command
reconnects and resends what is unacknowledged; the server answers batches it
already has with their original acks. If the append fails after sending, it
says on stderr how many records were acknowledged and how to append the rest
exactly once (--producer-id and --batch-seq).`,
		Example: `  echo hello | strand append orders
  strand append orders --file events.log
  echo '{"temp":21}' | strand append sensor --timestamp 2024-01-02T15:04:05Z --header unit=celsius
  strand read orders --format json | strand append orders-copy --format json
  strand append orders --file part2.log --producer-id 6f1c...e2 --batch-seq 12`,
		Args: cobra.ExactArgs(1),
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
			popt, err := pf.options(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if finish := progressBar(progress, size, "appending", &in); finish != nil {
				defer finish()
			}
			src, err := newSource(in, inFormat, headers, timestamp)
			if err != nil {
				return err
			}
			res, err := appendRecords(cmd.Context(), c, args[0], src, popt, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if res.records == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "nothing to append: the input is empty")
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "appended %s to %s (seqs %d..%d)\n", plural(res.records, "record"), args[0], res.first, res.last)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the input from this file instead of stdin")
	cmd.Flags().StringVar(&progress, "progress", "auto", "progress bar: auto (on a terminal, for inputs over 1 MiB), on or off")
	cmd.Flags().StringVar(&inFormat, "format", "text", "input: text (each line a record's body) or json (each line a JSON record)")
	cmd.Flags().StringArrayVar(&headers, "header", nil, "add header NAME=VALUE to every record (repeatable)")
	cmd.Flags().StringVar(&timestamp, "timestamp", "", "every record's timestamp (ms since the epoch or RFC 3339; default: the server's arrival time)")
	pf.bind(cmd)
	return cmd
}

// progressBar wraps *in with a progress bar on stderr when mode asks for
// one (auto: stderr is a terminal and the input is over 1 MiB or of
// unknown size) and returns the function that finishes it (nil: none).
func progressBar(mode string, size int64, what string, in *io.Reader) func() {
	if !(mode == "on" || (mode == "auto" && term.IsTerminal(int(os.Stderr.Fd())) && (size < 0 || size > 1<<20))) {
		return nil
	}
	bar := progressbar.DefaultBytes(size, what)
	*in = io.TeeReader(*in, bar)
	return func() { _ = bar.Finish() }
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

// printRaw prints m as one line of raw JSON (shared/rawjson): the CLI's
// --json and --format json output is the API's Strand-Format: raw.
func printRaw(w io.Writer, m proto.Message) error {
	b, err := rawjson.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// streamMsg is s as the API's Stream message.
func streamMsg(s client.Stream) *strandv1.Stream {
	m := &strandv1.Stream{Name: s.Name, Id: s.ID, Leader: s.Leader, CreatedMs: s.CreatedMs, RetentionMs: s.RetentionMs, Deleting: s.Deleting,
		Timestamping: &strandv1.Timestamping{Mode: timestampingMode(s.Timestamping), Uncapped: s.Uncapped}}
	switch s.Class {
	case "standard":
		m.StorageClass = strandv1.StorageClass_STORAGE_CLASS_STANDARD
	case "express":
		m.StorageClass = strandv1.StorageClass_STORAGE_CLASS_EXPRESS
	}
	return m
}

// timestampingMode is the API's mode of a client.Stream's Timestamping
// ("client-prefer" is TIMESTAMPING_MODE_CLIENT_PREFER).
func timestampingMode(name string) strandv1.TimestampingMode {
	return strandv1.TimestampingMode(strandv1.TimestampingMode_value["TIMESTAMPING_MODE_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))])
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
	switch mode {
	case "off":
		return nil
	case "on", "auto":
	default:
		return fmt.Errorf("--progress %q: want auto, on or off", mode)
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
