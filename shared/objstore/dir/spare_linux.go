//go:build linux

package dir

import (
	"os"
	"sync"
)

// Spare anonymous files (ADR 0069). Opening an O_TMPFILE file puts a new
// inode on ext4's orphan list, a journalled change that waits while the
// journal commits another put's fsync: in a trace of `strand dev` at
// 0.5 MB/s (one Express flight every 2 ms), that open took about 1 ms a
// flight, more than one of the put's fsyncs (mostly a wait for the
// journal's previous commit, which the put's fsync would also wait for:
// the commit's p50 fell 0.1-0.2 ms, not 1 ms). So each staging directory
// keeps spareFiles empty anonymous files opened ahead, off the put's
// path: a put takes one and a background goroutine opens its
// replacement. A spare is an empty file in no directory; it is only
// written once taken, and a crash frees it like any anonymous file, so
// the crash safety of a put is unchanged.

// spareFiles is how many empty anonymous files each staging directory
// keeps opened ahead: one flight's body, and the next one's.
const spareFiles = 2

// spareDirs bounds the staging directories with spares in the process (a
// `strand dev` has six buckets); a directory past it takes the place of
// the one used least recently, whose spares are closed.
const spareDirs = 8

// spareCache is the spare files by staging directory.
type spareCache struct {
	mu   sync.Mutex
	dirs map[string]*spareDir
	lru  []string // least recently used first
}

// spareDir is one directory's spares and whether a refill is running.
type spareDir struct {
	files     []*os.File
	refilling bool
	gone      bool // evicted: a running refill closes what it opens
}

var spares = &spareCache{dirs: map[string]*spareDir{}}

// take is an empty anonymous file on dir's filesystem: a spare when one is
// ready, else a new one. Either way a refill of dir's spares starts.
func (c *spareCache) take(dir string) (*os.File, error) {
	c.mu.Lock()
	d := c.use(dir)
	var f *os.File
	if n := len(d.files); n > 0 {
		f, d.files = d.files[n-1], d.files[:n-1]
	}
	refill := !d.refilling && len(d.files) < spareFiles
	d.refilling = d.refilling || refill
	c.mu.Unlock()
	if refill {
		go c.refill(dir, d)
	}
	if f != nil {
		return f, nil
	}
	return openAnon(dir)
}

// use is dir's entry, made the most recently used (evicting the least
// recently used past spareDirs). Called with c.mu held.
func (c *spareCache) use(dir string) *spareDir {
	d := c.dirs[dir]
	if d == nil {
		d = &spareDir{}
		c.dirs[dir] = d
	}
	for i, name := range c.lru {
		if name == dir {
			c.lru = append(c.lru[:i], c.lru[i+1:]...)
			break
		}
	}
	c.lru = append(c.lru, dir)
	if len(c.lru) > spareDirs {
		old := c.dirs[c.lru[0]]
		delete(c.dirs, c.lru[0])
		c.lru = c.lru[1:]
		old.gone = true
		for _, f := range old.files {
			f.Close()
		}
		old.files = nil
	}
	return d
}

// refill opens spares for d until it holds spareFiles, stopping at the
// first failure (a put then opens its own file and reports the error).
func (c *spareCache) refill(dir string, d *spareDir) {
	for {
		f, err := openAnon(dir)
		c.mu.Lock()
		if err != nil || d.gone {
			d.refilling = false
			c.mu.Unlock()
			if f != nil {
				f.Close()
			}
			return
		}
		d.files = append(d.files, f)
		full := len(d.files) >= spareFiles
		if full {
			d.refilling = false
		}
		c.mu.Unlock()
		if full {
			return
		}
	}
}
