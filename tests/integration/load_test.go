package integration

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore/dynamo"
	"github.com/strandlog/strand/tests/testproc"
)

// adminToken issues a token for every stream on d's table.
func adminToken(ctx context.Context, t *testing.T, d *deployment) string {
	t.Helper()
	token, err := auth.NewToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.Issue(ctx, dynamo.New(d.ddb, d.table), token, "", []auth.Op{auth.Admin}); err != nil {
		t.Fatal(err)
	}
	return token
}

// load is a producer (append sessions) and a tailing reader on each of a
// Standard and an Express stream, created through c, resuming after each
// session end as testproc's do.
type load struct {
	names   []string
	o       *testproc.Observed
	ackedTo []atomic.Uint64
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startLoad(ctx context.Context, t *testing.T, c *client.Client, prefix string) *load {
	t.Helper()
	l := &load{names: []string{prefix + "/std", prefix + "/exp"}, o: testproc.NewObserved(), stop: make(chan struct{})}
	l.ackedTo = make([]atomic.Uint64, len(l.names))
	for i, n := range l.names {
		if _, err := c.CreateStream(ctx, n, client.CreateOptions{Class: []string{"standard", "express"}[i]}); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	for i, n := range l.names {
		l.wg.Go(func() { testproc.Producer(ctx, c, n, l.o, &l.ackedTo[i], l.stop) })
		l.wg.Go(func() { testproc.Reader(ctx, c, n, l.o, l.stop) })
	}
	return l
}

// end stops the producers and readers.
func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

// checkAcked fails t unless every acknowledged record reads back through
// c at its seq, with its body, once.
func (l *load) checkAcked(ctx context.Context, t *testing.T, c *client.Client, stage string) {
	t.Helper()
	for i, n := range l.names {
		recs, _ := readAll(ctx, t, c, n)
		acked := l.ackedTo[i].Load()
		if uint64(len(recs)) < acked {
			t.Fatalf("%s: %d records after the %s, %d were acknowledged", n, len(recs), stage, acked)
		}
		for s, r := range recs[:acked] {
			if r.Seq != uint64(s) || string(r.Body) != testproc.Body(n, uint64(s)) {
				t.Fatalf("%s: record %d is seq %d %q, want %q (lost or duplicated)", n, s, r.Seq, r.Body, testproc.Body(n, uint64(s)))
			}
		}
	}
}
