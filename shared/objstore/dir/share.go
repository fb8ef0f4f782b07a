package dir

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Shared bodies (ADR 0047). A chain slot is written with the same key and
// the same bytes to every bucket of its set, and on `strand dev` the set's
// buckets are folders of one filesystem. The buckets opened under one
// root share their staged bodies (the process's shareCache, keyed by root
// and key): the first PutIfAbsent of a key stages the body
// (an anonymous file, fsynced), and a put of the same key to another
// bucket whose body is byte for byte the staged file's links that file
// under its own name instead of writing and fsyncing the bytes again. The
// copies are then hard links of one inode: still one name per bucket
// (deleting one leaves the others), objects are never written in place,
// and each link is made durable by its own directory's fsync, as before.
// A put whose body differs (a fencer's poison, another writer's flight)
// stages its own. Only anonymous files are shared (Linux).

// shareKeep is how many staged bodies the process keeps open for other
// buckets' puts of the same key: the slots of a few pipelines' windows.
const shareKeep = 64

// shareCache is the staged bodies by root and key (shareKey), at most
// shareKeep, the oldest dropped first.
type shareCache struct {
	mu    sync.Mutex
	byKey map[string]*sharedBody
	fifo  []*sharedBody
}

// sharedBody is one staged body. ready is closed once staging ended: ok
// says whether it succeeded, and f is then the staged file. refs counts the puts using
// f and the cache's own hold while listed: f is closed at zero, never
// while a put may still link its /proc/self/fd name (a closed descriptor's
// number can be reused by another file).
type sharedBody struct {
	key   string
	size  int
	ready chan struct{}
	f     anonFile
	ok    bool
	refs  int
}

// shares is the process's cache: its keys are a root and a key (shareKey),
// and its bound, shareKeep, holds over every root, so that a process that
// opens many roots (tests) keeps at most shareKeep files open for it.
var shares = &shareCache{byKey: map[string]*sharedBody{}}

// shareKey is the cache's key of key under root.
func shareKey(root, key string) string { return root + "\x00" + key }

// stage stages body for key (a shareKey): the staged file of an earlier
// put of key when its bytes are body's, else a new anonymous file in dir,
// kept for later puts of key.
func (c *shareCache) stage(dir, key string, body []byte) (staged, error) {
	c.mu.Lock()
	if e := c.byKey[key]; e != nil && e.size == len(body) {
		e.refs++
		c.mu.Unlock()
		<-e.ready
		if e.ok && sameBytes(e.f.f, body) {
			return &sharedStage{c: c, e: e, dir: dir, body: body}, nil
		}
		c.release(e)
		return stageAnon(dir, body)
	}
	e := &sharedBody{key: key, size: len(body), ready: make(chan struct{}), refs: 2} // this put's and the cache's
	c.byKey[key] = e
	c.fifo = append(c.fifo, e)
	var drop *sharedBody
	if len(c.fifo) > shareKeep {
		drop, c.fifo = c.fifo[0], c.fifo[1:]
		if c.byKey[drop.key] == drop {
			delete(c.byKey, drop.key)
		}
	}
	c.mu.Unlock()
	if drop != nil {
		c.release(drop)
	}
	st, err := stageAnon(dir, body)
	if err == nil {
		e.f, e.ok = st.(anonFile), true
	}
	close(e.ready)
	if err != nil {
		c.release(e)
		return nil, err
	}
	return &sharedStage{c: c, e: e, dir: dir, body: body}, nil
}

// release drops one reference to e, closing its file at the last.
func (c *shareCache) release(e *sharedBody) {
	c.mu.Lock()
	e.refs--
	last := e.refs == 0
	c.mu.Unlock()
	if last && e.ok {
		e.f.discard()
	}
}

// sharedStage is a put's use of a shared staged body; own is the body
// staged anew when the shared file can no longer be linked.
type sharedStage struct {
	c    *shareCache
	e    *sharedBody
	dir  string
	body []byte
	own  staged
}

// link links the shared file to final. Once every name of a linked file
// is deleted it cannot be linked again (ENOENT, as for a pruned parent),
// and a bucket mounted apart from the one that staged it cannot link it
// (EXDEV): then, with final's parent there, the body is staged anew and
// linked.
func (s *sharedStage) link(final string) error {
	if s.own != nil {
		return s.own.link(final)
	}
	err := s.e.f.link(final)
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EXDEV) {
		return err
	}
	if _, serr := os.Stat(filepath.Dir(final)); serr != nil {
		return err // the parent went: PutIfAbsent recreates it
	}
	own, serr := stageAnon(s.dir, s.body)
	if serr != nil {
		return serr
	}
	s.own = own
	return own.link(final)
}

func (s *sharedStage) discard() {
	s.c.release(s.e)
	if s.own != nil {
		s.own.discard()
	}
}

// sameBytes reports whether f holds exactly body (read back in pieces).
func sameBytes(f *os.File, body []byte) bool {
	buf := make([]byte, min(len(body), 256<<10))
	for off := 0; off < len(body); off += len(buf) {
		n := min(len(buf), len(body)-off)
		if got, err := f.ReadAt(buf[:n], int64(off)); got != n || (err != nil && got != n) || !bytes.Equal(buf[:n], body[off:off+n]) {
			return false
		}
	}
	return true
}
