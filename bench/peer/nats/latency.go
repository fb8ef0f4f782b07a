package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/strandlog/strand/shared/client"
)

// The latency phase: records of -record bytes at -latency-rate MB/s, one
// record per publish or append, for -latency; record i is due at
// t0 + i x gap and its latencies count from then (the schedule), not from
// when it was sent, so a sender held up by a slow server is charged for it
// (no coordinated omission). A consumer reading from the stream's start
// (JetStream: an ordered consumer; strand: a read session that tails),
// opened before the first record, gives the end-to-end latency (due to
// received); the ack latency is due to acknowledged.

// schedule is a paced run: record i is due at t0 + i x gap.
type schedule struct {
	t0  time.Time
	gap time.Duration
}

func newSchedule(rateMBps float64, size int) schedule {
	gap := time.Duration(float64(size) / (rateMBps * 1e6) * float64(time.Second))
	return schedule{t0: time.Now().Add(50 * time.Millisecond), gap: gap}
}

func (s schedule) due(i int) time.Time { return s.t0.Add(time.Duration(i) * s.gap) }

// wait sleeps until record i is due (at once when it is overdue).
func (s schedule) wait(i int) {
	if d := time.Until(s.due(i)); d > 0 {
		time.Sleep(d)
	}
}

// latencies are one paced run's: by record, from its due time.
type latencies struct {
	s        schedule
	ack, e2e []time.Duration
}

func newLatencies(s schedule, n int) *latencies {
	return &latencies{s: s, ack: make([]time.Duration, n), e2e: make([]time.Duration, n)}
}

// received notes record body's arrival at the consumer; it returns its
// index.
func (l *latencies) received(b []byte) (int, error) {
	if len(b) < 8 {
		return 0, errors.New("record too short")
	}
	i := int(binary.BigEndian.Uint64(b))
	if i < 0 || i >= len(l.e2e) {
		return 0, fmt.Errorf("record %d outside the run", i)
	}
	l.e2e[i] = time.Since(l.s.due(i))
	return i, nil
}

// quantile is ds's q-quantile in milliseconds (nearest rank).
func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	k := min(len(s)-1, max(0, int(q*float64(len(s))+0.5)-1))
	return float64(s[k]) / 1e6
}

// into sets res's latency figures.
func (l *latencies) into(res *result, rateMBps float64) {
	res.LatencyRateMBps = rateMBps
	res.AckP50, res.AckP99 = quantile(l.ack, 0.5), quantile(l.ack, 0.99)
	res.E2EP50, res.E2EP99 = quantile(l.e2e, 0.5), quantile(l.e2e, 0.99)
}

// natsLatency is the latency phase on JetStream stream LAT.
func natsLatency(ctx context.Context, js jetstream.JetStream, n, size int, rateMBps float64) (*latencies, error) {
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LAT", Subjects: []string{"lat"}, Storage: jetstream.FileStorage}); err != nil {
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, "LAT", jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	l := newLatencies(newSchedule(rateMBps, size), n)
	read := make(chan error, 1)
	go func() {
		for range n {
			m, err := it.Next()
			if err == nil {
				_, err = l.received(m.Data())
			}
			if err != nil {
				read <- err
				return
			}
		}
		read <- nil
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var pubErr error
	for i := range n {
		l.s.wait(i)
		f, err := js.PublishAsync("lat", body(i, size), jetstream.WithStallWait(time.Minute))
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-f.Ok():
				l.ack[i] = time.Since(l.s.due(i))
			case err := <-f.Err():
				mu.Lock()
				pubErr = cmpErr(pubErr, fmt.Errorf("publish %d: %w", i, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if pubErr != nil {
		return nil, pubErr
	}
	return l, waitRead(read)
}

// strandLatency is the latency phase on a new stream "lat" of class.
func strandLatency(ctx context.Context, c *client.Client, class string, n, size int, rateMBps float64) (*latencies, error) {
	if _, err := c.CreateStream(ctx, "lat", client.CreateOptions{Class: class}); err != nil {
		return nil, err
	}
	rs, err := c.OpenReadSession(ctx, "lat", client.FromSeq(0), client.SessionOptions{})
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	s, err := c.OpenAppendSession(ctx, "lat")
	if err != nil {
		return nil, err
	}
	defer s.Close()
	l := newLatencies(newSchedule(rateMBps, size), n)
	read := make(chan error, 1)
	go func() {
		got := 0
		for got < n && rs.Next() {
			for _, r := range rs.Batch().Records {
				i, err := l.received(r.Body)
				if err == nil && uint64(i) != r.Seq {
					err = fmt.Errorf("record %d at seq %d", i, r.Seq)
				}
				if err != nil {
					read <- err
					return
				}
				got++
			}
		}
		if got < n {
			read <- fmt.Errorf("read session ended after %d of %d records: %v", got, n, rs.Err())
			return
		}
		read <- nil
	}()
	acked := make(chan error, 1)
	go func() {
		for i := range n {
			a, ok := <-s.Acks()
			switch {
			case !ok:
				acked <- fmt.Errorf("append session ended after %d of %d acks", i, n)
				return
			case a.Err != nil:
				acked <- a.Err
				return
			}
			l.ack[i] = time.Since(l.s.due(i))
		}
		acked <- nil
	}()
	for i := range n {
		l.s.wait(i)
		if err := s.Submit([]client.Record{{Body: body(i, size)}}, client.AppendOptions{}); err != nil {
			return nil, err
		}
	}
	if err := <-acked; err != nil {
		return nil, err
	}
	return l, waitRead(read)
}

// waitRead waits for a consumer's end, at most a minute after the last ack.
func waitRead(read <-chan error) error {
	select {
	case err := <-read:
		return err
	case <-time.After(time.Minute):
		return errors.New("the consumer did not receive every record within a minute of the last ack")
	}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
