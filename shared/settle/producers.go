package settle

import "github.com/strandlog/strand/shared/metastore"

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
