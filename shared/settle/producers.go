package settle

import (
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
