package kafka

// Test hooks for the external tests (kafka_test, which run a node).
var (
	RawBatch      = rawBatch
	EncodeRecords = encodeRecords
	SampleRecords = sampleRecords
)
