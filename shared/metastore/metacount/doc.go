// Package metacount is a metastore.Store wrapper that counts calls per
// method (atomic counters), for tests and benchmarks that measure the
// metastore bill: how many requests settlement or the star makes per
// second, per pass, per slot. Wrap any store with New, run the workload,
// and read Snapshot: Total, Reads, Writes, Of(op), and RefItems (the item
// writes PutRefs costs). It adds no behaviour.
package metacount
