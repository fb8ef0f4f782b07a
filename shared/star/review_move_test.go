package star

import (
	"context"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

// ADR 0065, I2 for the command TestMoveSealThenOpen leaves out: after the
// seal is acknowledged the old star refuses a trim too (ErrMoved naming
// the new star), and the trim point does not move; a trim before the seal
// travels with the seal's command state.
func TestReviewTrimAfterSealRefused(t *testing.T) {
	ctx := context.Background()
	a := newHarness(t, metastore.Standard, 1, 1)
	a.start()
	id := a.open(metastore.Standard, 1)[0]
	if _, err := a.star.Append(ctx, id, recs(5, nil2), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.star.Trim(ctx, id, 2, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.star.Seal(ctx, id, "star-1"); err != nil {
		t.Fatal(err)
	}
	_, _, err := a.star.Trim(ctx, id, 4, AppendOptions{})
	wantMoved(t, err, "star-1", "trim after the seal")
	c, err := a.star.Commands(id)
	if err != nil {
		t.Fatal(err)
	}
	if to, ok := Sealed(&c); !ok || to != "star-1" || c.TrimSeq != 2 {
		t.Fatalf("commands after a refused trim: %+v, want sealed to star-1 with trim 2", c)
	}
}
