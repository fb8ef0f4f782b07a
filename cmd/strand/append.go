package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
)

// producerFlags name the producer of an exactly-once append.
type producerFlags struct {
	id         string
	batchSeq   uint64
	fenceToken string
}

func (f *producerFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.id, "producer-id", "", "resume this producer (32 hex digits; default: a random one)")
	cmd.Flags().Uint64Var(&f.batchSeq, "batch-seq", 0, "the producer's next batch seq on the stream (printed on exit; with --producer-id)")
	cmd.Flags().StringVar(&f.fenceToken, "fence-token", "", "the stream's fencing token, if it is fenced (strand fence)")
}

func (f *producerFlags) options(stderr io.Writer) (client.ProducerOptions, error) {
	opt := client.ProducerOptions{OnReconnect: func(cause error) {
		fmt.Fprintf(stderr, "strand: connection lost (%v); reconnecting and resending unacknowledged batches\n", cause)
	}, FenceToken: f.fenceToken}
	if f.id == "" {
		if f.batchSeq != 0 {
			return opt, fmt.Errorf("--batch-seq %d needs --producer-id", f.batchSeq)
		}
		return opt, nil
	}
	p, err := client.ParseProducerID(f.id)
	if err != nil {
		return opt, fmt.Errorf("--producer-id: %w", err)
	}
	opt.Producer, opt.FirstBatchSeq = &p, f.batchSeq
	return opt, nil
}

// appended is what an append got acknowledged.
type appended struct {
	first, last uint64 // seqs of the first and last record acknowledged
	records     int
	batches     int
}

// resume says how to append the rest of the input exactly once after a
// failure: the acknowledged records are skipped and the producer resumes
// at the batch after them (the rest batches as before, so a batch that
// was committed without its ack reaching us is answered with its ack).
func (a appended) resume(p client.ProducerID, firstBatch uint64) string {
	return fmt.Sprintf("%s acknowledged; to append the rest exactly once, rerun with the input after the first %d and --producer-id %s --batch-seq %d",
		plural(a.records, "record"), a.records, p, firstBatch+uint64(a.batches))
}

// plural is "1 record", "2 records".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// appendRecords appends every record of src through one exactly-once
// producer session and waits for every ack. It says on stderr where to
// resume only when that matters: after a failure once batches were sent,
// and after a success when the caller named the producer (--producer-id),
// who then needs its next batch seq.
func appendRecords(ctx context.Context, c *client.Client, stream string, src recordSource, popt client.ProducerOptions, stderr io.Writer) (res appended, err error) {
	sess, err := c.OpenProducerSession(ctx, stream, popt)
	if err != nil {
		return res, err
	}
	defer sess.Close()
	sent, batches := 0, 0
	defer func() {
		switch {
		case err != nil && mayResume(res, batches, err):
			fmt.Fprintln(stderr, "strand:", res.resume(sess.Producer(), popt.FirstBatchSeq))
		case err == nil && popt.Producer != nil:
			fmt.Fprintf(stderr, "producer %s next batch seq %d\n", sess.Producer(), sess.NextBatchSeq())
		}
	}()
	done := make(chan error, 1)
	go func() {
		for a := range sess.Acks() {
			if a.Err != nil {
				done <- a.Err
				return
			}
			if res.records == 0 {
				res.first = a.StartSeq
			}
			res.last = a.EndSeq - 1
			res.records += int(a.EndSeq - a.StartSeq)
			res.batches++
		}
		done <- nil
	}()
	var b batcher
	flush := func() error {
		if len(b.recs) == 0 {
			return nil
		}
		if err := sess.Submit(b.recs); err != nil {
			return err
		}
		sent += len(b.recs)
		batches++
		b = batcher{}
		return nil
	}
	var inErr, serr error
	for n := 1; ; n++ {
		r, err := src.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil {
			err = checkRecord(r, n)
		}
		if err != nil {
			inErr = err
			break
		}
		m := metered(r)
		if len(b.recs) == maxBatchRecords || b.bytes+m > maxBatchBytes || b.headers+len(r.Headers) > maxBatchHeaders {
			if serr = flush(); serr != nil {
				break
			}
		}
		b.recs = append(b.recs, r)
		b.bytes += m
		b.headers += len(r.Headers)
	}
	if serr == nil {
		serr = flush() // what came before bad input too
	}
	_ = sess.CloseSend()
	ackErr := <-done
	switch {
	case ackErr != nil && res.records == 0 && batches == 1:
		return res, ackErr
	case ackErr != nil:
		return res, fmt.Errorf("after %d of %d records were acknowledged: %w", res.records, sent, ackErr)
	case serr != nil:
		return res, serr
	case res.records != sent:
		return res, fmt.Errorf("only %d of %d records were acknowledged", res.records, sent)
	case inErr != nil:
		// What came before the bad input is appended; the rest is not.
		return res, fmt.Errorf("%w; %s before it appended", inErr, plural(res.records, "record"))
	}
	return res, nil
}

// mayResume reports whether a failed append should say how to resume: some
// batches were acknowledged, or more than one was sent, or the one sent
// may have been written (its refusal is not definite).
func mayResume(res appended, batches int, err error) bool {
	if batches == 0 {
		return false
	}
	if res.batches > 0 || batches > 1 {
		return true
	}
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodePermissionDenied,
		connect.CodeUnauthenticated, connect.CodeNotFound, connect.CodeResourceExhausted:
		return false // refused: nothing was written
	}
	return true
}

// metered is a record's size as the limits count it: body plus header
// names and values (format.MeteredSize).
func metered(r client.Record) int {
	n := len(r.Body)
	for _, h := range r.Headers {
		n += len(h.Name) + len(h.Value)
	}
	return n
}

// checkRecord refuses record n if no batch can hold it.
func checkRecord(r client.Record, n int) error {
	if m := metered(r); m > format.MaxRecordBytes {
		return fmt.Errorf("%w: record %d is %d bytes, body plus headers, over the record limit (1 MiB)", ErrInput, n, m)
	}
	if len(r.Headers) > maxBatchHeaders {
		return fmt.Errorf("%w: record %d has %d headers (at most %d)", ErrInput, n, len(r.Headers), maxBatchHeaders)
	}
	return nil
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
			if err := checkProgress(progress); err != nil {
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
