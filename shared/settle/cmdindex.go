package settle

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
)

// putCommandIndex writes the command index of the version 2 run (or
// merged run) obj that is about to be put at key (design 014, "The
// command index"): at format.CommandIndexKey(key), before the run, so
// that a run this build wrote has one (a version 1 run has no command
// table and no index). It is a pure function of the run's bytes: a copy
// of the same plan writes the same bytes. One already there (a copy's,
// of this plan or of another that will lose the run's PutIfAbsent) is
// left as it is: readers check its binding to the run (the run's CRC and
// size) and read the run's command table instead when it does not match.
// Trim deletes it with its run. A run whose command table is at most
// cmdxMinTable bytes gets none: a lookup reads such a table whole
// (absorb.CommandIndexMinTable), so its index would never be read.
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
	if err := s.Settled.PutIfAbsent(ctx, ck, cmdx); err != nil && !errors.Is(err, objstore.ErrExists) && !errors.Is(err, objstore.ErrAmbiguous) {
		return fmt.Errorf("write the command index %s: %w", ck, err)
	}
	return nil
}

// putRun writes run r (a run or a merged run) at key if absent, its
// command index first (putCommandIndex). written: this call stored it;
// false with no error: a copy stored one first (or the put's outcome is
// unknown), and the stored one is the run, whatever it says.
func (s *Settler) putRun(ctx context.Context, key string, r *format.PassIndex) (written bool, err error) {
	obj, err := format.AppendPassIndex(nil, *r)
	if err != nil {
		return false, fmt.Errorf("encode the run %s: %w", key, err)
	}
	if err := s.putCommandIndex(ctx, key, obj); err != nil {
		return false, err
	}
	switch err := s.Settled.PutIfAbsent(ctx, key, obj); {
	case err == nil:
		return true, nil
	case errors.Is(err, objstore.ErrExists) || errors.Is(err, objstore.ErrAmbiguous):
		return false, nil
	default:
		return false, fmt.Errorf("write the run %s: %w", key, err)
	}
}

// cmdxMinTable: a run's command table larger than this gets a command
// index (tests lower it: SetCommandIndexMin).
var cmdxMinTable int64 = absorb.CommandIndexMinTable
