package settle

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// putCommandIndex writes the command index of the version 2 run (or
// merged run) obj that this copy has just stored at key (design 014, "The
// command index"): at format.CommandIndexKey(key), after the run, by the
// copy whose put stored it, so that it is a pure function of the
// run stored (a copy that lost the run, or a dead plan, writes none: the
// run is the step's commit point, and nothing at a key that names only
// its first slot is written before it). A crash between the two leaves
// the run without one: readers read its command table whole (and check
// an index's binding to the run, its CRC and size, in any case). Trim
// deletes it with its run. A run whose command table is at most
// cmdxMinTable bytes gets none: a lookup reads such a table whole
// (passindex.CommandIndexMinTable), so its index would never be read.
func (s *Settler) putCommandIndex(ctx context.Context, key string, obj []byte) error {
	h, err := format.ParsePassHeader(obj)
	if err != nil || h.Version != format.PassIndexVersionCommands || int64(len(obj))-4-h.CommandsAt() <= cmdxMinTable {
		return nil // AppendPassIndex's output: a version 1 run, or a small table
	}
	cmdx, err := format.AppendCommandIndex(nil, obj)
	if err != nil {
		return fmt.Errorf("command index of %s: %w", key, err)
	}
	ck := format.CommandIndexKey(key)
	if err := objstore.PutGiven(ctx, s.Settled, ck, cmdx); err != nil && !errors.Is(err, objstore.ErrExists) && !errors.Is(err, objstore.ErrAmbiguous) {
		return fmt.Errorf("write the command index %s: %w", ck, err)
	}
	return nil
}

// putRun writes run r (a run or a merged run) at key if absent, then its
// command index (putCommandIndex) if this call stored it. written: this
// call stored it; false with no error: a copy stored one first (or the
// put's outcome is unknown), and the stored one is the run, whatever it
// says.
func (s *Settler) putRun(ctx context.Context, key string, r *format.PassIndex) (written bool, err error) {
	obj, err := format.AppendPassIndex(nil, *r)
	if err != nil {
		return false, fmt.Errorf("encode the run %s: %w", key, err)
	}
	switch err := objstore.PutGiven(ctx, s.Settled, key, obj); { // obj is only read after
	case err == nil:
	case errors.Is(err, objstore.ErrExists) || errors.Is(err, objstore.ErrAmbiguous):
		return false, nil
	default:
		return false, fmt.Errorf("write the run %s: %w", key, err)
	}
	if err := s.putCommandIndex(ctx, key, obj); err != nil {
		// The run is stored (the step's commit point): its readers read
		// its command table whole.
		s.log().Warn("settle: command index not written", "run", key, "err", err)
	}
	return true, nil
}

// cmdxMinTable: a run's command table larger than this gets a command
// index (tests lower it: SetCommandIndexMin).
var cmdxMinTable int64 = passindex.CommandIndexMinTable
