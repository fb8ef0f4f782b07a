package dynamo

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/strandlog/strand/shared/emulator"
	"github.com/strandlog/strand/shared/metastore"
)

// TestLandedWriteRetried: every conditional write whose first request
// lands and whose answer is lost (the SDK then sends it again, and an
// emulator that ignores ClientRequestToken, as moto does, fails the
// retry's condition on the write's own effect) reports success, and the
// item holds the write once. Each case injects the loss at the proxy on
// the write's request (lostOp), after the case's setup.
func TestLandedWriteRetried(t *testing.T) {
	ctx := context.Background()
	e1, e2 := metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 3}
	str := metastore.Stream{Name: "s", ID: sid(1), Class: metastore.Standard, Star: "star-0", State: metastore.StreamActive}
	mint := func(st *Store) error { return st.MintEpoch(ctx, chain, 0, epoch(1)) }
	runLanded(t, []landedCase{
		{"MintEpoch first", "TransactWriteItems", nil, mint, func(st *Store) error {
			return wantHead(st, chain, func(h metastore.Head) bool { return h.Epoch == 1 })
		}},
		{"MintEpoch next", "TransactWriteItems", mint, func(st *Store) error { return st.MintEpoch(ctx, chain, 1, epoch(2)) }, func(st *Store) error {
			return wantHead(st, chain, func(h metastore.Head) bool { return h.Epoch == 2 })
		}},
		{"UpdateEpoch", "TransactWriteItems", mint, func(st *Store) error {
			e := epoch(1)
			e.State, e.Cut = metastore.EpochFenced, 7
			return st.UpdateEpoch(ctx, chain, metastore.EpochActive, e)
		}, func(st *Store) error {
			e, err := st.GetEpoch(ctx, chain, 1)
			if err == nil && (e.State != metastore.EpochFenced || e.Cut != 7) {
				err = errors.New("epoch 1 not fenced at 7")
			}
			return err
		}},
		{"AdvanceCursor settled", "TransactWriteItems", mint, func(st *Store) error {
			return st.AdvanceCursor(ctx, chain, metastore.Settled, e1, e2)
		}, func(st *Store) error {
			return wantHead(st, chain, func(h metastore.Head) bool { return h.Settled == e2 })
		}},
		{"AdvanceCursor checkpoint", "TransactWriteItems", func(st *Store) error {
			if err := mint(st); err != nil {
				return err
			}
			_, err := st.BeginAbsorb(ctx, chain, e1, e2)
			return err
		}, func(st *Store) error {
			return st.AdvanceCursor(ctx, chain, metastore.Checkpoint, e1, e2)
		}, func(st *Store) error {
			return wantHead(st, chain, func(h metastore.Head) bool { return h.Checkpoint == e2 && h.Absorbing.IsZero() })
		}},
		{"BeginAbsorb", "UpdateItem", mint, func(st *Store) error {
			_, err := st.BeginAbsorb(ctx, chain, e1, e2)
			return err
		}, func(st *Store) error {
			return wantHead(st, chain, func(h metastore.Head) bool { return h.Absorbing == e2 })
		}},
		{"CreateStream", "TransactWriteItems", nil, func(st *Store) error {
			_, err := st.CreateStream(ctx, str)
			return err
		}, func(st *Store) error {
			got, err := st.GetStream(ctx, "s")
			if err == nil && got != str {
				err = errors.New("another stream")
			}
			return err
		}},
		{"SetStreamState deleting", "TransactWriteItems", func(st *Store) error {
			_, err := st.CreateStream(ctx, str)
			return err
		}, func(st *Store) error {
			return st.SetStreamState(ctx, "s", str.ID, metastore.StreamDeleting)
		}, func(st *Store) error {
			if _, err := st.GetStream(ctx, "s"); !errors.Is(err, metastore.ErrNotFound) {
				return errors.New("the stream is still under its name")
			}
			return nil
		}},
		{"PutLease (contract: ErrConflict with the lease stored)", "PutItem", nil, func(st *Store) error {
			l := metastore.Lease{Star: "star-0", Holder: "h", Addr: "h:4780", Version: 1, TTLMs: 3000}
			stored, err := st.PutLease(ctx, l)
			if errors.Is(err, metastore.ErrConflict) && stored == l {
				return nil // the caller takes this for its own write (lease.Core.Wrote)
			}
			return fmt.Errorf("stored %+v, %w", stored, err)
		}, func(st *Store) error {
			l, err := st.GetLease(ctx, "star-0")
			if err == nil && l.Holder != "h" {
				err = errors.New("another lease")
			}
			return err
		}},
		{"SwapRefs", "TransactWriteItems", func(st *Store) error {
			if err := mint(st); err != nil {
				return err
			}
			if _, err := st.BeginAbsorb(ctx, chain, e1, e2); err != nil {
				return err
			}
			return st.PutRefs(ctx, chain, e2, []metastore.Ref{ref(sid(1), 0, 4), ref(sid(1), 5, 9)})
		}, func(st *Store) error {
			return st.SwapRefs(ctx, []metastore.Ref{ref(sid(1), 0, 4), ref(sid(1), 5, 9)}, ref(sid(1), 0, 9))
		}, func(st *Store) error {
			refs, err := st.QueryRefs(ctx, sid(1), 0, 10)
			if err == nil && (len(refs) != 1 || refs[0].LastSeq != 9) {
				err = errors.New("not the one merged ref")
			}
			return err
		}},
	})
}

// landedCase is a write whose answer to the request lostOp is lost once
// (the SDK sends it again), after setup; check reads what it stored.
type landedCase struct {
	name   string
	lostOp string
	setup  func(st *Store) error
	write  func(st *Store) error
	check  func(st *Store) error
}

// runLanded runs each case on a table of its own: the write, landed and
// retried, must succeed and store what check wants.
func runLanded(t *testing.T, cases []landedCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, table := newTable(t)
			var armed atomic.Bool
			var lost atomic.Int64
			p := newDDBProxy(t, func(string, int) (int, string) { return 0, "" })
			p.lose = func(op string, n int) bool {
				if armed.Load() && op == tc.lostOp && lost.Add(1) == 1 {
					return true
				}
				return false
			}
			st := New(retryOnce(p), table)
			if tc.setup != nil {
				if err := tc.setup(st); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}
			armed.Store(true)
			if err := tc.write(st); err != nil {
				t.Errorf("the write, landed and retried: %v, want success", err)
			}
			if lost.Load() == 0 {
				t.Fatalf("no %s answer was lost", tc.lostOp)
			}
			if err := tc.check(st); err != nil {
				t.Errorf("after the write: %v", err)
			}
		})
	}
}

func wantHead(st *Store, c metastore.ChainID, ok func(metastore.Head) bool) error {
	h, err := st.GetHead(context.Background(), c)
	if err == nil && !ok(h) {
		err = errors.New("the head does not hold the write")
	}
	return err
}

// TestRacerLosesToLandedWrite: between a write that landed and its
// retry, a racer making the same change (another store, the same
// advance) still loses with ErrConflict, and the retried write succeeds:
// the write id, not the change, tells a transaction's own effect.
func TestRacerLosesToLandedWrite(t *testing.T) {
	ctx := context.Background()
	c, table := newTable(t)
	racer := New(c, table)
	if err := racer.MintEpoch(ctx, chain, 0, epoch(1)); err != nil {
		t.Fatal(err)
	}
	from, to := metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 3}
	var racerErr error
	var lost atomic.Int64
	p := newDDBProxy(t, func(string, int) (int, string) { return 0, "" })
	p.lose = func(op string, n int) bool {
		if op != "TransactWriteItems" || lost.Add(1) != 1 {
			return false
		}
		racerErr = racer.AdvanceCursor(ctx, chain, metastore.Settled, from, to)
		return true
	}
	if err := New(retryOnce(p), table).AdvanceCursor(ctx, chain, metastore.Settled, from, to); err != nil {
		t.Errorf("the write that landed, retried: %v, want success", err)
	}
	if !errors.Is(racerErr, metastore.ErrConflict) {
		t.Errorf("the racer after it landed: %v, want ErrConflict", racerErr)
	}
}

// retryOnce is a client through p whose SDK retries a failed request
// once, at once.
func retryOnce(p *ddbProxy) *dynamodb.Client {
	return dynamodb.NewFromConfig(emulator.ConfigFor(p.srv.URL), func(o *dynamodb.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 2
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
}
