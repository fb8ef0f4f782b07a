package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/client"
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

// appendLines appends each line of in as a record through one exactly-once
// producer session, waits for every ack, and prints the producer and its
// next batch seq on stderr.
func appendLines(ctx context.Context, c *client.Client, stream string, in io.Reader, popt client.ProducerOptions, stderr io.Writer) (first, last uint64, n int, err error) {
	sess, err := c.OpenProducerSession(ctx, stream, popt)
	if err != nil {
		return 0, 0, 0, err
	}
	defer sess.Close()
	defer func() {
		fmt.Fprintf(stderr, "producer %s next batch seq %d (resume: --producer-id %s --batch-seq %d)\n",
			sess.Producer(), sess.NextBatchSeq(), sess.Producer(), sess.NextBatchSeq())
	}()
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
	var serr error
	flush := func() error {
		if len(b.recs) == 0 {
			return nil
		}
		if err := sess.Submit(b.recs); err != nil {
			return err
		}
		sent += len(b.recs)
		b = batcher{}
		return nil
	}
	lines := newLineReader(in)
	for {
		line, err := lines.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, 0, err
		}
		if len(b.recs) == maxBatchRecords || b.bytes+len(line) > maxBatchBytes {
			if serr = flush(); serr != nil {
				break
			}
		}
		b.recs = append(b.recs, client.Record{Body: line})
		b.bytes += len(line)
	}
	if serr == nil {
		_ = flush()
	}
	_ = sess.CloseSend()
	if err := <-done; err != nil {
		return first, last, acked, fmt.Errorf("after %d of %d records were acknowledged: %w", acked, sent, err)
	}
	if acked != sent {
		return first, last, acked, fmt.Errorf("only %d of %d records were acknowledged; rerun with the producer and batch seq printed below to append the rest exactly once", acked, sent)
	}
	return first, last, acked, nil
}
