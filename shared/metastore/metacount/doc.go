// Package metacount is a metastore.Store wrapper that counts calls per
// method (atomic counters), for tests and benchmarks that measure the
// metastore bill: how many requests settlement or the star makes per
// second, per pass, per slot. Wrap any store with New, run the workload,
// and read Snapshot: Total, Reads, Writes, Of(op), RefItems (the refs
// PutRefs was given), and Units: the item writes and DynamoDB request units
// the calls would cost, by item size, as DynamoDB bills them (units.go
// states the rules and where they are published). It adds no behaviour.
package metacount
