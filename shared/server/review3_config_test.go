package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/trim"
)

// slowConfig is a metastore whose SetStreamConfig of retention hold
// waits until release is closed (after telling entered).
type slowConfig struct {
	metastore.Store
	hold             int64
	entered, release chan struct{}
	once             atomic.Bool
}

func (m *slowConfig) SetStreamConfig(ctx context.Context, name, id string, retentionMs int64, ts metastore.Timestamping) error {
	if retentionMs == m.hold && m.once.CompareAndSwap(false, true) {
		close(m.entered)
		<-m.release
	}
	return m.Store.SetStreamConfig(ctx, name, id, retentionMs, ts)
}

// TestReview3ConcurrentReconfigures (derived state, attack): two
// ReconfigureStream calls of one stream at once, the first (retention a
// day) slow to write the stream's metadata. The metadata must end with
// the configuration of the config command sequenced last (an hour), the
// one reads and recovery use: trim applies the longer of the metadata's
// retention and the command's, so a metadata left at the day would keep
// the stream's records a day though the stream says an hour.
func TestReview3ConcurrentReconfigures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const day, hour = int64(24 * 3600 * 1000), int64(3600 * 1000)
	meta := &slowConfig{Store: newMeta(t), hold: day, entered: make(chan struct{}), release: make(chan struct{})}
	n := newNodeOn(t, meta, "star-0", nil, nil, nil, []objstore.Bucket{objstore.NewMem("std")}, []objstore.Bucket{objstore.NewMem("e0"), objstore.NewMem("e1"), objstore.NewMem("e2")})
	c := newClient(t, n, adminTok)
	st, err := c.CreateStream(ctx, "logs/cfg", client.CreateOptions{Class: "express"})
	must(t, err)
	first := make(chan error, 1)
	go func() {
		d := day
		_, _, err := c.ReconfigureStream(ctx, "logs/cfg", client.ReconfigureOptions{RetentionMs: &d})
		first <- err
	}()
	<-meta.entered // the day's command is sequenced; its metadata write waits
	go func() {
		time.Sleep(200 * time.Millisecond)
		close(meta.release)
	}()
	h := hour
	if _, _, err := c.ReconfigureStream(ctx, "logs/cfg", client.ReconfigureOptions{RetentionMs: &h}); err != nil {
		t.Fatal(err)
	}
	must(t, <-first)
	id, err := format.ParseStreamID(st.ID)
	must(t, err)
	cmds, err := n.star.Commands(id)
	must(t, err)
	got, err := meta.GetStream(ctx, "logs/cfg")
	must(t, err)
	if cmds.Config.RetentionMs != hour || got.RetentionMs != hour {
		t.Fatalf("after the two reconfigures: the stream's command says %d ms, its metadata %d ms; want both %d (the one sequenced last)", cmds.Config.RetentionMs, got.RetentionMs, hour)
	}
	if r := trim.Retention(got, cmds); r != hour {
		t.Fatalf("trim applies a retention of %d ms, want %d", r, hour)
	}
}
