package settle

// SetMergeChunk sets the merge's ranged GET size (tests: small chunks
// exercise the read ahead) and returns the function that restores it.
func SetMergeChunk(n int64) (restore func()) {
	old := mergeChunk
	mergeChunk = n
	return func() { mergeChunk = old }
}
