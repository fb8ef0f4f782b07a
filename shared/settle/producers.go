package settle

import (
	"slices"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// mergeMarks carries the producer marks of the refs a settled ref replaces
// into it (in seq order, bounded by metastore.TrimMarks), so a successor
// star still finds each producer's latest batches after settlement.
func mergeMarks(old []metastore.Ref) []metastore.ProducerMark {
	var marks []metastore.ProducerMark
	for _, r := range old {
		marks = append(marks, r.Producers...)
	}
	if len(marks) == 0 {
		return nil
	}
	return metastore.TrimMarks(marks)
}

// lastCarried is the carried table the settled ref keeps: the newest of
// the refs it replaces (ADR 0062), as lastCommands keeps the newest command
// state. Its marks lie at or below that ref's last seq, so inside the
// settled ref's; a successor takes the union of its parts' own marks and
// carried tables (star.RecoverStream), so an older table adds nothing the
// newest one and the own marks after it do not give.
func lastCarried(old []metastore.Ref) ([]metastore.ProducerMark, uint64) {
	for i := len(old) - 1; i >= 0; i-- {
		if len(old[i].Carried) > 0 {
			return slices.Clone(old[i].Carried), old[i].CarriedBelow
		}
	}
	return nil, 0
}

// lastPassCarried is lastCarried of a run's or merged run's parts.
func lastPassCarried(parts []*format.PassStream) ([]format.PassMark, uint64) {
	for i := len(parts) - 1; i >= 0; i-- {
		if len(parts[i].Carried) > 0 {
			return slices.Clone(parts[i].Carried), parts[i].CarriedBelow
		}
	}
	return nil, 0
}

// lastCommands is the command state the settled ref keeps: the latest of
// the refs it replaces (each ref's is the state as of its last record), so
// a successor star still finds the stream's fencing token and trim point.
func lastCommands(old []metastore.Ref) *format.StreamCommands {
	for i := len(old) - 1; i >= 0; i-- {
		if c := old[i].Commands; c != nil {
			cs := *c
			return &cs
		}
	}
	return nil
}
