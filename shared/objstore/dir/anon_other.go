//go:build !linux

package dir

import (
	"errors"
	"os"
)

// anonFile is never made outside Linux (share.go names it).
type anonFile struct{ f *os.File }

func (anonFile) link(string) error { return errAnon }
func (anonFile) discard()          {}

var errAnon = errors.New("objstore/dir: no anonymous files on this platform")

// stageAnon is never called outside Linux: anonSupported says no.
func stageAnon(string, []byte) (staged, error) { return nil, errAnon }

// anonSupported: outside Linux the bucket writes named temp files.
func anonSupported(string) bool { return false }
