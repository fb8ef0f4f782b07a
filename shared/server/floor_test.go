package server_test

import (
	"context"
	"testing"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
)

// A stream whose refs are all gone (trimmed, or deleted by a race) reopens
// at its floor, never below a seq it acknowledged (issue 13, finding 1:
// without the floor it reopened at seq 0 and reused seq numbers).
func TestReopenAtFloor(t *testing.T) {
	ctx := context.Background()
	meta := newMeta(t)
	n := newNode(t, meta, "star-0", true, nil)
	st := metastore.Stream{Name: "logs/floor", ID: "0123456789abcdef0123456789abcdef", Class: metastore.Express,
		Star: "star-0", CreatedMs: 1, RetentionMs: 1000, State: metastore.StreamActive}
	if _, err := meta.CreateStream(ctx, st); err != nil {
		t.Fatal(err)
	}
	must(t, meta.RaiseFloor(ctx, st.Name, st.ID, 42))
	c := newClient(t, n, adminTok)
	a, err := c.Append(ctx, st.Name, recs(2, "x"), client.AppendOptions{})
	must(t, err)
	if a.StartSeq != 42 {
		t.Fatalf("append to a stream without refs and floor 42: %+v, want first seq 42", a)
	}
}
