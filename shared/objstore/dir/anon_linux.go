//go:build linux

package dir

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// anonFile is a body staged as an anonymous file: written and fsynced, in
// no directory, so a crash before its link leaves nothing behind.
type anonFile struct{ f *os.File }

// stageAnon writes body to a new anonymous file (O_TMPFILE, opened for
// reading too: a shared body is read back, share.go) on dir's filesystem
// and fsyncs it.
func stageAnon(dir string, body []byte) (staged, error) {
	f, err := spares.take(dir)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return anonFile{f}, nil
}

// link names the file final. linkat with AT_EMPTY_PATH would need
// CAP_DAC_READ_SEARCH; through its /proc/self/fd link (followed) it needs
// nothing, and like link(2) it fails with EEXIST when final exists.
func (a anonFile) link(final string) error {
	proc := "/proc/self/fd/" + strconv.Itoa(int(a.f.Fd()))
	if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW); err != nil {
		return &os.LinkError{Op: "linkat", Old: proc, New: final, Err: err}
	}
	return nil
}

func (a anonFile) discard() { a.f.Close() }

// anonSupported reports whether dir's filesystem stages bodies as
// anonymous files: O_TMPFILE opens there (Linux 3.11+, on ext4, xfs,
// btrfs, tmpfs...) and /proc is mounted to link them by. It stages and
// links a probe file in dir and removes it; any failure means no, and the
// bucket writes named temp files instead.
func anonSupported(dir string) bool {
	st, err := stageAnon(dir, nil)
	if err != nil {
		return false
	}
	defer st.discard()
	probe := filepath.Join(dir, fmt.Sprintf("probe-%d-%p", os.Getpid(), &st))
	if err := st.link(probe); err != nil {
		return false
	}
	os.Remove(probe)
	return true
}

// openAnon opens a new, empty anonymous file on dir's filesystem.
func openAnon(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open O_TMPFILE", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}
