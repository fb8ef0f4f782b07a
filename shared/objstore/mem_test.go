package objstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/objstoretest"
)

func TestMemConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return objstore.NewMem("mem") })
}

func TestMemHelpers(t *testing.T) {
	ctx := context.Background()
	m := objstore.NewMem("b")
	if m.Name() != "b" {
		t.Fatalf("Name = %q", m.Name())
	}
	for _, k := range []string{"z", "a/b", "m"} {
		if err := m.PutIfAbsent(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := m.Keys(), []string{"a/b", "m", "z"}; !slices.Equal(got, want) {
		t.Fatalf("Keys = %q, want %q", got, want)
	}
	if m.Len() != 3 {
		t.Fatalf("Len = %d, want 3", m.Len())
	}
}

func TestMemErrorsCarryContext(t *testing.T) {
	m := objstore.NewMem("bkt")
	_, err := m.Get(context.Background(), "some/key", 0, -1)
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("got %v", err)
	}
	if got, want := err.Error(), "get bkt/some/key: objstore: not found"; got != want {
		t.Fatalf("error text %q, want %q", got, want)
	}
	_, err = m.Get(context.Background(), "some/key", -1, 1)
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("negative offset on a missing key: got %v", err)
	}
	if err := m.PutIfAbsent(context.Background(), "k", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(context.Background(), "k", -1, 1); !errors.Is(err, objstore.ErrRange) {
		t.Fatalf("negative offset: got %v, want ErrRange", err)
	}
}

func TestMemSetConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return objstore.NewMemSet("a", "b")[1] })
}
