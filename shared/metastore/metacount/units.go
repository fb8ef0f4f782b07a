package metacount

import "github.com/strandlog/strand/shared/metastore"

// DynamoDB bills requests in request units by item size, not by call
// (on-demand pricing, https://aws.amazon.com/dynamodb/pricing/on-demand/,
// and "DynamoDB read and write operations" in the Developer Guide,
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html):
//
//   - a standard write of an item up to 1 KB is 1 write request unit
//     (WRU), one more per further KB; a transactional write (every action
//     of TransactWriteItems, a ConditionCheck included) is 2 WRU per KB;
//     a delete is billed on the deleted item's size;
//   - a strongly consistent read of up to 4 KB is 1 read request unit
//     (RRU), one more per further 4 KB; a Query is billed on the sum of
//     the sizes of the items it returns, rounded up to 4 KB (a Query that
//     returns nothing still costs 1).
//
// metastore/dynamo writes every conditional write as a transaction and
// reads strongly consistent (its doc.go says which items each call
// writes); the functions below follow those shapes, with item sizes from
// metastore.RefSize, EpochSize and TokenSize (upper bounds) and a fixed
// bound for the stream and head items. The figures are what the same calls
// would cost on DynamoDB, whatever store is wrapped.
const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
	// headItemBytes bounds a HEAD item: its keys, the epoch, the cursors
	// and the lease (numbers) and their names, in either layout of
	// metastore/dynamo: at most 618 bytes in layout 1 and 924 in layout 2
	// (a switched chain's), at the longest star id and the largest
	// numbers (TestHeadLayout2Item there); one write unit either way.
	headItemBytes = 1024
	// streamFixedBytes bounds a stream item less its strings (numbers,
	// names, keys' fixed parts).
	streamFixedBytes = 512
)

// Units is what a run of calls costs on DynamoDB.
type Units struct {
	// Items is the item writes: every Put, Update, Delete and
	// ConditionCheck action, each billed as an item written.
	Items int64
	// WRU and RRU are write and read request units.
	WRU, RRU int64
}

func (u Units) add(v Units) Units { return Units{u.Items + v.Items, u.WRU + v.WRU, u.RRU + v.RRU} }

// writeUnits is the WRU of one standard write of an item of size bytes.
func writeUnits(size int) int64 { return int64(max(1, (size+writeUnitBytes-1)/writeUnitBytes)) }

// readUnits is the RRU of a strongly consistent read of size bytes (one
// item, or a Query's sum).
func readUnits(size int) int64 { return int64(max(1, (size+readUnitBytes-1)/readUnitBytes)) }

// tx is one TransactWriteItems whose actions touch items of these sizes.
func tx(sizes ...int) Units {
	u := Units{Items: int64(len(sizes))}
	for _, n := range sizes {
		u.WRU += 2 * writeUnits(n)
	}
	return u
}

// read is one strongly consistent GetItem or Query returning these sizes.
func read(sizes ...int) Units {
	t := 0
	for _, n := range sizes {
		t += n
	}
	return Units{RRU: readUnits(t)}
}

// StreamItemBytes bounds a stream's META item (its listing item is the
// same size or less).
func StreamItemBytes(s metastore.Stream) int {
	return streamFixedBytes + 2*len(s.Name) + len(s.ID) + len(s.Star)
}

// streamTx: a transaction on a stream's META and listing items.
func streamTx(name, id string) Units {
	n := StreamItemBytes(metastore.Stream{Name: name, ID: id})
	return tx(n, n)
}

// PutRefsUnits: per transaction (metastore.RefChunks), a ConditionCheck
// of the HEAD and a Put per ref.
func PutRefsUnits(refs []metastore.Ref) Units {
	var u Units
	for chunk := range metastore.RefChunks(refs) {
		sizes := []int{headItemBytes}
		for _, r := range chunk {
			sizes = append(sizes, metastore.RefSize(r))
		}
		u = u.add(tx(sizes...))
	}
	return u
}

// SwapRefsUnits: one transaction, the replacement's Put (billed on the
// larger of it and the item it replaces) and a Delete of each other old
// ref.
func SwapRefsUnits(old []metastore.Ref, repl metastore.Ref) Units {
	sizes := []int{metastore.RefSize(repl)}
	for i, r := range old {
		if i == 0 {
			sizes[0] = max(sizes[0], metastore.RefSize(r))
			continue
		}
		sizes = append(sizes, metastore.RefSize(r))
	}
	return tx(sizes...)
}

// SettleRefUnits: one transaction, a ConditionCheck of the HEAD (the
// settled cursor), then what SwapRefs bills: the replacement's Put (on
// the larger of it and the old ref it replaces) and a Delete of each other
// old ref; and the neighbours' check (metastore.SettleApart): a query of
// the ref before repl (when repl starts past seq 0) and of the refs in
// the seqs it adds past old's last key, and a ConditionCheck of the ref
// before (without old refs; billed as if one is stored, at repl's size)
// or of the key just past old (when repl reaches past them).
func SettleRefUnits(old []metastore.Ref, repl metastore.Ref) Units {
	u := SwapRefsUnits(old, repl).add(tx(headItemBytes))
	if repl.FirstSeq > 0 {
		u = u.add(read(0))
	}
	if metastore.SettleReach(old, repl) < repl.LastSeq {
		u = u.add(read(0))
	}
	switch {
	case len(old) == 0 && repl.FirstSeq > 0:
		u = u.add(tx(metastore.RefSize(repl)))
	case len(old) > 0 && repl.LastSeq > old[len(old)-1].LastSeq:
		u = u.add(tx(0))
	}
	return u
}

// DeleteRefsUnits: a Delete per ref, MaxDeleteRefsPerTx per transaction.
func DeleteRefsUnits(refs []metastore.Ref) Units {
	var u Units
	for i := 0; i < len(refs); i += metastore.MaxDeleteRefsPerTx {
		var sizes []int
		for _, r := range refs[i:min(len(refs), i+metastore.MaxDeleteRefsPerTx)] {
			sizes = append(sizes, metastore.RefSize(r))
		}
		u = u.add(tx(sizes...))
	}
	return u
}

// sizes is the item size of each of xs.
func sizes[T any](xs []T, size func(T) int) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = size(x)
	}
	return out
}

// tokenDeleteBytes bounds a token item whose contents the caller of
// DeleteToken does not give: a hash, a prefix and a few operations.
const tokenDeleteBytes = 1024
