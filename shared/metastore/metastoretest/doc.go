// Package metastoretest is the conformance suite of metastore.Store. Every
// implementation (metastore.Mem, metastore/bolt, metastore/dynamo) calls Run
// from its tests:
//
//	func TestConformance(t *testing.T) {
//		metastoretest.Run(t, func(t *testing.T) metastore.Store { return metastore.NewMem() })
//	}
//
// open must return a fresh, empty store for each call (every subtest opens
// its own) and arrange its cleanup with t.Cleanup.
//
// The suite pins down, beyond the package documentation of metastore, the
// points where that documentation is silent (errors on invalid arguments,
// paging, one-way states); the package documentation lists them too. It is
// written to run against DynamoDB on a local emulator as well: it never
// depends on timing (races start from a barrier and check outcomes only),
// and each subtest makes at most a few hundred calls.
package metastoretest
