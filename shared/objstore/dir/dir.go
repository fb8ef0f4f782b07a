package dir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/strandlog/strand/shared/objstore"
)

var (
	// ErrInvalidKey: the key is empty, absolute, has an empty, "." or ".."
	// segment, contains NUL, or names the .tmp folder.
	ErrInvalidKey = errors.New("objstore/dir: invalid key")
	// ErrKeyConflict: the key's path is, or runs through, another key's
	// directory or file ("a" and "a/b" cannot both be files).
	ErrKeyConflict = errors.New("objstore/dir: key conflicts with another key's path")
)

// tmpDir is the folder, inside the bucket, that holds bodies being written.
const tmpDir = ".tmp"

// afterStage, when set (by tests only), runs in PutIfAbsent between
// staging the body and linking it: the moment a crash test kills the
// process at.
var afterStage func()

// linkAttempts bounds the retries of PutIfAbsent when a concurrent Delete
// prunes the directory the object is being linked into.
const linkAttempts = 8

// Bucket is one bucket kept as a directory tree. It is safe for concurrent
// use, also by several processes sharing the directory.
type Bucket struct {
	name string
	root string // <root>/<bucket>, absolute
	tmp  string // <root>/<bucket>/.tmp
	// anon: stage bodies as anonymous files (O_TMPFILE, then linkat
	// through /proc/self/fd), which cost no directory entry in .tmp and
	// leave nothing behind a crash; false where the kernel or filesystem
	// has none (probed by Open) or outside Linux.
	anon bool
	// share: the staged bodies the buckets under the same root share
	// (share.go), with anon; shareRoot is that root.
	share     *shareCache
	shareRoot string
}

var (
	_ objstore.Bucket     = (*Bucket)(nil)
	_ objstore.ReaderInto = (*Bucket)(nil)
)

// Open opens (creating if needed) the bucket folder <root>/<bucket>.
func Open(root, bucket string) (*Bucket, error) {
	if bucket == "" || bucket == "." || bucket == ".." ||
		strings.ContainsAny(bucket, "/\\\x00") {
		return nil, fmt.Errorf("objstore/dir: open bucket %q: invalid bucket name", bucket)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("objstore/dir: open bucket %q in %q: %w", bucket, root, err)
	}
	b := &Bucket{name: bucket, root: filepath.Join(abs, bucket)}
	b.tmp = filepath.Join(b.root, tmpDir)
	if err := os.MkdirAll(b.tmp, 0o755); err != nil {
		return nil, fmt.Errorf("objstore/dir: open bucket %q: %w", bucket, err)
	}
	b.anon = anonSupported(b.tmp)
	if b.anon {
		b.share, b.shareRoot = shares, abs
	}
	return b, nil
}

// Name returns the bucket's name.
func (b *Bucket) Name() string { return b.name }

// Root returns the bucket's folder, <root>/<bucket>.
func (b *Bucket) Root() string { return b.root }

// ValidKey reports whether key is acceptable as an object key (nil) or why
// not (an error wrapping ErrInvalidKey).
func ValidKey(key string) error {
	why := ""
	switch {
	case key == "":
		why = "empty"
	case strings.HasPrefix(key, "/"):
		why = "absolute"
	case strings.HasSuffix(key, "/"):
		why = "ends with '/'"
	case strings.IndexByte(key, 0) >= 0:
		why = "contains NUL"
	case key == tmpDir || strings.HasPrefix(key, tmpDir+"/"):
		why = "names the " + tmpDir + " folder"
	default:
		for seg := range strings.SplitSeq(key, "/") {
			switch seg {
			case "":
				why = "has an empty segment"
			case ".", "..":
				why = "has a " + seg + " segment"
			}
			if why != "" {
				break
			}
		}
	}
	if why != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why)
	}
	return nil
}

func (b *Bucket) path(key string) string {
	return filepath.Join(b.root, filepath.FromSlash(key))
}

// check validates key and ctx before an operation.
func (b *Bucket) check(ctx context.Context, op, key string) error {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("%s %s: %w", op, b.name, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s/%s: %w", op, b.name, key, err)
	}
	return nil
}

// notFound reports whether err means the path does not exist, including a
// path that runs through a regular file.
func notFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// PutIfAbsent writes body at key unless an object is there. See the package
// documentation for the steps that make it atomic and crash safe.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if err := b.check(ctx, "put", key); err != nil {
		return err
	}
	wrap := func(err error) error { return fmt.Errorf("put %s/%s: %w", b.name, key, err) }

	st, err := b.stage(key, body)
	if err != nil {
		return wrap(err)
	}
	defer st.discard()
	if afterStage != nil {
		afterStage()
	}
	if err := ctx.Err(); err != nil {
		return wrap(err) // nothing is linked yet: nothing was written
	}

	final := b.path(key)
	for attempt := 1; ; attempt++ {
		err := b.mkdirs(key)
		if err == nil {
			err = st.link(final)
		}
		if err == nil {
			break
		}
		if errors.Is(err, ErrKeyConflict) {
			return wrap(err)
		}
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Lstat(final); serr == nil && !fi.Mode().IsRegular() {
				return wrap(fmt.Errorf("%w: %s is a directory", ErrKeyConflict, key))
			}
			return wrap(objstore.ErrExists)
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return wrap(fmt.Errorf("%w: a parent of %s is an object", ErrKeyConflict, key))
		}
		if errors.Is(err, fs.ErrNotExist) && attempt < linkAttempts {
			continue // a concurrent Delete pruned a parent directory
		}
		return wrap(err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		// The object is visible but may not survive a crash.
		return wrap(fmt.Errorf("%w: linked but not synced: %v", objstore.ErrAmbiguous, err))
	}
	return nil
}

// staged is a body written and fsynced but not yet an object: link gives
// it its key's name (failing with EEXIST when the name exists), discard
// releases what is left of it (the temp file, or the anonymous file's
// descriptor) after the link or instead of it.
type staged interface {
	link(final string) error
	discard()
}

// stage writes body where no key can see it and fsyncs it: an anonymous
// file (O_TMPFILE, Linux) when the bucket's filesystem supports one, and
// then the one another bucket under the same root staged for key when it
// holds the same bytes (share.go); else a named temp file in .tmp
// (writeTemp).
func (b *Bucket) stage(key string, body []byte) (staged, error) {
	if b.anon && b.share != nil {
		return b.share.stage(b.tmp, shareKey(b.shareRoot, key), body)
	}
	if b.anon {
		return stageAnon(b.tmp, body)
	}
	name, err := b.writeTemp(body)
	if err != nil {
		return nil, err
	}
	return namedTemp(name), nil
}

// namedTemp is a body staged as a named temp file in .tmp.
type namedTemp string

func (t namedTemp) link(final string) error { return os.Link(string(t), final) }
func (t namedTemp) discard()                { os.Remove(string(t)) }

// writeTemp writes body to a new fsynced file in the .tmp folder and
// returns its path.
func (b *Bucket) writeTemp(body []byte) (string, error) {
	f, err := os.CreateTemp(b.tmp, "put-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// mkdirs creates the parent directories of key, fsyncing the parent of each
// directory it creates so the new entries are durable.
func (b *Bucket) mkdirs(key string) error {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return nil
	}
	if fi, err := os.Stat(b.path(key[:i])); err == nil && fi.IsDir() {
		return nil // the common case: the directory is there
	}
	dir := b.root
	for seg := range strings.SplitSeq(key[:i], "/") {
		parent := dir
		dir = filepath.Join(dir, seg)
		err := os.Mkdir(dir, 0o755)
		switch {
		case err == nil:
			if err := syncDir(parent); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
			fi, serr := os.Stat(dir)
			if serr != nil {
				return serr
			}
			if !fi.IsDir() {
				return fmt.Errorf("%w: %s is an object", ErrKeyConflict, filepath.ToSlash(mustRel(b.root, dir)))
			}
		default:
			return err
		}
	}
	return nil
}

func mustRel(base, path string) string {
	rel, err := filepath.Rel(base, path)
	if err != nil {
		return path
	}
	return rel
}

// syncDir fsyncs a directory so entries created or removed in it persist.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Get reads n bytes of key at off (n < 0: to the end) with ReadAt.
func (b *Bucket) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	var buf []byte
	_, err := b.readAt(ctx, key, off, n, func(m int64) []byte {
		buf = make([]byte, m)
		return buf
	})
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// GetInto reads up to len(dst) bytes of key at off into dst with ReadAt.
func (b *Bucket) GetInto(ctx context.Context, key string, off int64, dst []byte) (int, error) {
	return b.readAt(ctx, key, off, int64(len(dst)), func(m int64) []byte { return dst[:m] })
}

// readAt reads n bytes of key at off (n < 0: to the end; fewer where the
// object ends) into the buffer buf returns for that many.
func (b *Bucket) readAt(ctx context.Context, key string, off, n int64, buf func(int64) []byte) (int, error) {
	if err := b.check(ctx, "get", key); err != nil {
		return 0, err
	}
	wrap := func(err error) error { return fmt.Errorf("get %s/%s: %w", b.name, key, err) }
	// O_NOFOLLOW: a symlink planted in the bucket is no object (as for
	// Head and Delete); its target is never read.
	f, err := os.OpenFile(b.path(key), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if notFound(err) || errors.Is(err, syscall.ELOOP) {
		return 0, wrap(objstore.ErrNotFound)
	}
	if err != nil {
		return 0, wrap(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, wrap(err)
	}
	if !fi.Mode().IsRegular() {
		return 0, wrap(objstore.ErrNotFound) // a directory of longer keys
	}
	size := fi.Size()
	if off < 0 || off > size || (off == size && size > 0) {
		return 0, fmt.Errorf("get %s/%s at %d (size %d): %w", b.name, key, off, size, objstore.ErrRange)
	}
	end := size
	if n >= 0 && n < size-off {
		end = off + n
	}
	p := buf(end - off)
	if len(p) == 0 {
		return 0, nil
	}
	got, err := f.ReadAt(p, off)
	if err != nil && !(errors.Is(err, io.EOF) && got == len(p)) {
		return 0, wrap(err)
	}
	return got, nil
}

// Head returns the size of key.
func (b *Bucket) Head(ctx context.Context, key string) (int64, error) {
	if err := b.check(ctx, "head", key); err != nil {
		return 0, err
	}
	fi, err := os.Lstat(b.path(key))
	if notFound(err) || (err == nil && !fi.Mode().IsRegular()) {
		return 0, fmt.Errorf("head %s/%s: %w", b.name, key, objstore.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("head %s/%s: %w", b.name, key, err)
	}
	return fi.Size(), nil
}

// Delete removes key (a missing key is not an error), fsyncs its directory
// and prunes parent directories left empty, up to the bucket folder.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.check(ctx, "delete", key); err != nil {
		return err
	}
	wrap := func(err error) error { return fmt.Errorf("delete %s/%s: %w", b.name, key, err) }
	final := b.path(key)
	fi, err := os.Lstat(final)
	if notFound(err) || (err == nil && fi.IsDir()) {
		return nil
	}
	if err != nil {
		return wrap(err)
	}
	if err := os.Remove(final); err != nil && !notFound(err) {
		return wrap(err)
	}
	dir := filepath.Dir(final)
	if err := syncDir(dir); err != nil && !notFound(err) {
		return wrap(err)
	}
	// Prune empty parents. Failing (not empty, or raced) just stops; a
	// concurrent PutIfAbsent whose directory vanishes recreates it.
	for dir != b.root && os.Remove(dir) == nil {
		dir = filepath.Dir(dir)
	}
	return nil
}

// List returns the keys under prefix in byte order, skipping .tmp.
func (b *Bucket) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", b.name, prefix, err)
	}
	start := b.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dirPart := prefix[:i]
		if err := ValidKey(dirPart); err != nil {
			if errors.Is(err, ErrInvalidKey) && (dirPart == tmpDir || strings.HasPrefix(dirPart, tmpDir+"/")) {
				return nil, nil // no key lives there
			}
			return nil, fmt.Errorf("list %s/%s: %w", b.name, prefix, err)
		}
		start = b.path(dirPart)
	}
	var keys []string
	err := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if notFound(err) {
				return nil // missing prefix directory, or removed while walking
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if path == b.root {
			return nil
		}
		key := filepath.ToSlash(mustRel(b.root, path))
		if d.IsDir() {
			if path == b.tmp {
				return filepath.SkipDir
			}
			// Descend only where keys with the prefix can be.
			dk := key + "/"
			if !strings.HasPrefix(dk, prefix) && !strings.HasPrefix(prefix, dk) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", b.name, prefix, err)
	}
	slices.Sort(keys)
	return keys, nil
}

// RemoveTemp deletes every file in the .tmp folder: bodies of writes that
// crashed before their link. Call it only when no PutIfAbsent is running on
// this bucket (in any process), or it may delete a body mid-write, which
// then fails that write cleanly. It returns how many files it removed.
func (b *Bucket) RemoveTemp() (int, error) {
	entries, err := os.ReadDir(b.tmp)
	if err != nil {
		return 0, fmt.Errorf("objstore/dir: remove temp in %s: %w", b.name, err)
	}
	n := 0
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(b.tmp, e.Name())); err != nil {
			return n, fmt.Errorf("objstore/dir: remove temp in %s: %w", b.name, err)
		}
		n++
	}
	return n, nil
}
