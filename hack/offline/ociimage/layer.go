package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Paths and ids of BaseDistrolessNonroot, as distroless has them.
const (
	caPath      = "/etc/ssl/certs/ca-certificates.crt"
	nonrootHome = "/home/nonroot"
	nonrootID   = 65532
)

// The account files and nsswitch.conf of distroless (GoogleContainerTools/distroless,
// common/BUILD.bazel and static/nsswitch.conf). Go's resolver reads only the hosts line.
const (
	passwd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`
	group = `root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
`
	nsswitch = `passwd:         compat
group:          compat
shadow:         compat
gshadow:        files

hosts:          files dns
networks:       files

protocols:      db files
services:       db files
ethers:         db files
rpc:            db files

netgroup:       nis
`
)

// entry is a directory or a regular file of a layer.
type entry struct {
	path     string // absolute path in the image
	dir      bool
	mode     int64 // permission bits, with the sticky bit (0o1000) for /tmp
	uid, gid int
	data     []byte // a file's contents
}

func dir(p string, mode int64, id int) entry {
	return entry{path: p, dir: true, mode: mode, uid: id, gid: id}
}

func file(p string, mode int64, data []byte) entry {
	return entry{path: p, mode: mode, data: data}
}

// layers returns the image's layers: the base's files, if any, then the binary.
func (opts Options) layers() ([]mutate.Addendum, error) {
	var adds []mutate.Addendum
	if opts.Base == BaseDistrolessNonroot {
		entries, err := distrolessNonroot(opts.CACertificates)
		if err != nil {
			return nil, err
		}
		base, err := layer(entries, opts.Created)
		if err != nil {
			return nil, err
		}
		adds = append(adds, addendum(base, opts.Created,
			"distroless static:nonroot files: /etc/passwd, /etc/group, /etc/nsswitch.conf, "+caPath+", /home/nonroot, /root, /tmp # ociimage"))
	}
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	binary, err := layer(append(parents(opts.BinaryPath), file(opts.BinaryPath, 0o755, bin)), opts.Created)
	if err != nil {
		return nil, err
	}
	return append(adds, addendum(binary, opts.Created,
		fmt.Sprintf("COPY %s %s # ociimage", opts.BinaryPath, opts.BinaryPath))), nil
}

func addendum(l v1.Layer, created time.Time, createdBy string) mutate.Addendum {
	return mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: createdBy}}
}

// distrolessNonroot returns the files of BaseDistrolessNonroot, with the CA certificates read
// from caFile.
func distrolessNonroot(caFile string) ([]entry, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates (Options.CACertificates) for %s: %w", caPath, err)
	}
	return []entry{
		dir("/etc", 0o755, 0),
		file("/etc/group", 0o644, []byte(group)),
		file("/etc/nsswitch.conf", 0o644, []byte(nsswitch)),
		file("/etc/passwd", 0o644, []byte(passwd)),
		dir("/etc/ssl", 0o755, 0),
		dir("/etc/ssl/certs", 0o755, 0),
		file(caPath, 0o644, ca),
		dir("/home", 0o755, 0),
		dir(nonrootHome, 0o700, nonrootID),
		dir("/root", 0o700, 0),
		dir("/tmp", 0o1777, 0),
	}, nil
}

// parents returns the directories above p, outermost first, as root's 0755 directories.
func parents(p string) []entry {
	var dirs []entry
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		dirs = append([]entry{dir(d, 0o755, 0)}, dirs...)
	}
	return dirs
}

// layer returns a gzip-compressed layer of entries, in their order, each with time mtime.
func layer(entries []entry, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     strings.TrimPrefix(e.path, "/"),
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			Size:     int64(len(e.data)),
			ModTime:  mtime,
		}
		if e.dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.path, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return l, nil
}
