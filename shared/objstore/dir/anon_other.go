//go:build !linux

package dir

import "errors"

// stageAnon is never called outside Linux: anonSupported says no.
func stageAnon(string, []byte) (staged, error) {
	return nil, errors.New("objstore/dir: no anonymous files on this platform")
}

// anonSupported: outside Linux the bucket writes named temp files.
func anonSupported(string) bool { return false }
