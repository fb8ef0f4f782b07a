package server_test

import (
	"context"
	"errors"
	"testing"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/trim"
)

// TestRecreateAtOnce (issue 30): `strand rm x && strand create x`. The
// delete retires the name, so the create succeeds at once with a new
// stream id; the new stream starts empty at seq 0 and reads none of the
// old one's records; trim then reclaims the old id's refs and metadata in
// the background and leaves the new stream whole. Before, the create was
// refused ("being deleted") until trim had removed the old stream.
func TestRecreateAtOnce(t *testing.T) {
	ctx := context.Background()
	meta := newMeta(t)
	n := newNode(t, meta, "star-0", true, nil)
	c := newClient(t, n, adminTok)
	old, err := c.CreateStream(ctx, "logs/x", client.CreateOptions{Class: "express"})
	must(t, err)
	_, err = c.Append(ctx, "logs/x", recs(3, "old"), client.AppendOptions{})
	must(t, err)
	must(t, c.DeleteStream(ctx, "logs/x"))

	again, err := c.CreateStream(ctx, "logs/x", client.CreateOptions{Class: "express"})
	if err != nil {
		t.Fatalf("create right after delete: %v", err)
	}
	if again.ID == old.ID {
		t.Fatalf("the new stream has the deleted one's id %s", old.ID)
	}
	a, err := c.Append(ctx, "logs/x", recs(2, "new"), client.AppendOptions{})
	must(t, err)
	if a.StartSeq != 0 || a.EndSeq != 2 {
		t.Fatalf("first append to the new stream: %+v, want seqs 0-1", a)
	}
	readNew := func(when string) {
		t.Helper()
		res, err := c.Read(ctx, "logs/x", client.FromSeq(0), client.Limits{})
		must(t, err)
		if len(res.Records) != 2 || string(res.Records[0].Body) != "new-0" || string(res.Records[1].Body) != "new-1" {
			t.Fatalf("%s: read %d records (%+v), want new-0 and new-1", when, len(res.Records), res.Records)
		}
	}
	readNew("before trim")

	// Trim reclaims the old id (its refs are all absorbed: the delete
	// drained it), not the new one.
	tr := &trim.Trimmer{Meta: meta}
	res, err := tr.Streams(ctx)
	must(t, err)
	if res.Deleted != 1 {
		t.Fatalf("trim %+v: want the old stream deleted", res)
	}
	if refs, err := meta.QueryRefs(ctx, old.ID, 0, 10); err != nil || len(refs) != 0 {
		t.Fatalf("refs of the deleted stream left: %+v %v", refs, err)
	}
	if gone, _, err := meta.ListDeleting(ctx, "", 10); err != nil || len(gone) != 0 {
		t.Fatalf("deleting streams left: %+v %v", gone, err)
	}
	st, err := meta.GetStream(ctx, "logs/x")
	if err != nil || st.ID != again.ID || st.State != metastore.StreamActive {
		t.Fatalf("logs/x after trim: %+v %v, want the new stream %s", st, err, again.ID)
	}
	readNew("after trim")

	// Deleted again: the old incarnation's late delete never touches it.
	must(t, meta.DeleteStream(ctx, "logs/x", old.ID))
	if _, err := meta.GetStream(ctx, "logs/x"); errors.Is(err, metastore.ErrNotFound) {
		t.Fatal("a delete of the old id removed the new stream")
	}
}
