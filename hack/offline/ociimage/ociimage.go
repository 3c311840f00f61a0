package ociimage

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Base selects the files under the binary.
type Base string

const (
	// BaseDistrolessNonroot is the files of gcr.io/distroless/static:nonroot that a static Go
	// binary uses, in a layer of their own; the user is nonroot (65532) and the working
	// directory its home, /home/nonroot.
	BaseDistrolessNonroot Base = "distroless-static-nonroot"
	// BaseScratch is no file at all, as with FROM scratch: the image is the binary alone, as
	// the Kubernetes pause image is.
	BaseScratch Base = "scratch"
)

// Defaults of Options.
const (
	DefaultRef            = "ghcr.io/configbundle/hub:dev"
	DefaultBinaryPath     = "/hub"
	DefaultCACertificates = "/etc/ssl/certs/ca-certificates.crt"
	// NonrootUser is distroless's nonroot user and group, the Dockerfile's USER.
	NonrootUser = "65532:65532"
)

// Environment of every image (PATH, as Docker and distroless set it) and of
// BaseDistrolessNonroot (SSL_CERT_FILE, as distroless sets it).
const (
	envPath    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	envSSLCert = "SSL_CERT_FILE=" + caPath
)

// Options describe an image. Only Binary is required.
type Options struct {
	// Ref is the name:tag the tar gives the image, the name it has after an import. Default
	// DefaultRef (ghcr.io/configbundle/hub:dev); without a tag, the tag is latest.
	Ref string
	// Binary is the path, on this machine, of the static Linux executable to put in the image:
	// an ELF file with no program interpreter (for Go, built with CGO_ENABLED=0). Required.
	Binary string
	// BinaryPath is the binary's absolute path in the image, which is also the Entrypoint.
	// Default DefaultBinaryPath (/hub).
	BinaryPath string
	// Base selects the files under the binary. Default BaseDistrolessNonroot.
	Base Base
	// User is the config's user, uid:gid. Default NonrootUser (65532:65532) on
	// BaseDistrolessNonroot; on BaseScratch, empty (root), so give it there (the pause image
	// uses 65535:65535).
	User string
	// Env holds KEY=VALUE entries appended to the environment, which always has PATH and on
	// BaseDistrolessNonroot also SSL_CERT_FILE. Default none.
	Env []string
	// Labels are the config's labels, such as org.opencontainers.image.version. Default none.
	Labels map[string]string
	// Arch is the image's architecture, as GOARCH spells it (the OS is always linux). Default
	// the binary's, from its ELF header; given, it must match the binary's.
	Arch string
	// CACertificates is the path, on this machine, of the PEM bundle of CA certificates that
	// BaseDistrolessNonroot copies to /etc/ssl/certs/ca-certificates.crt. Default
	// DefaultCACertificates (the same path); BaseScratch ignores it.
	CACertificates string
	// Created is the image's creation time and the time of every file in it, in whole seconds.
	// Default the Unix epoch (1970-01-01T00:00:00Z), so that the same inputs give the same
	// digest.
	Created time.Time
}

// Build builds the image that opts describe.
func Build(opts Options) (v1.Image, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	adds, err := opts.layers()
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = opts.Arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: opts.Created}
	cf.Config = v1.Config{
		User:       opts.User,
		Entrypoint: []string{opts.BinaryPath},
		WorkingDir: opts.workingDir(),
		Env:        append(opts.baseEnv(), opts.Env...),
		Labels:     maps.Clone(opts.Labels),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// Write builds the image that opts describe and writes it to file as a docker-archive tar
// naming it opts.Ref, creating file's directory if need be. It replaces file only once the tar
// is complete.
func Write(file string, opts Options) (v1.Image, error) {
	ref := cmp.Or(opts.Ref, DefaultRef)
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	img, err := Build(opts)
	if err != nil {
		return nil, err
	}
	if err := writeTar(file, tag, img); err != nil {
		return nil, err
	}
	return img, nil
}

func writeTar(file string, tag name.Tag, img v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", file, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create %s: %w", file, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	err = tmp.Chmod(0o644)
	if err == nil {
		err = tarball.Write(tag, img, tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

// withDefaults returns opts with its defaults filled in and checks it.
func (opts Options) withDefaults() (Options, error) {
	if opts.Binary == "" {
		return opts, errors.New("no binary: set Options.Binary")
	}
	opts.BinaryPath = cmp.Or(opts.BinaryPath, DefaultBinaryPath)
	if !path.IsAbs(opts.BinaryPath) || path.Clean(opts.BinaryPath) != opts.BinaryPath || opts.BinaryPath == "/" {
		return opts, fmt.Errorf("binary path in the image %q: want a clean absolute file path such as /hub", opts.BinaryPath)
	}
	opts.Base = cmp.Or(opts.Base, BaseDistrolessNonroot)
	switch opts.Base {
	case BaseDistrolessNonroot:
		opts.User = cmp.Or(opts.User, NonrootUser)
		opts.CACertificates = cmp.Or(opts.CACertificates, DefaultCACertificates)
	case BaseScratch:
	default:
		return opts, fmt.Errorf("unknown base %q: want %q or %q", opts.Base, BaseDistrolessNonroot, BaseScratch)
	}
	arch, err := staticBinaryArch(opts.Binary)
	if err != nil {
		return opts, err
	}
	if opts.Arch != "" && opts.Arch != arch {
		return opts, fmt.Errorf("binary %s is built for %s, not for the requested architecture %s", opts.Binary, arch, opts.Arch)
	}
	opts.Arch = arch
	opts.Created = opts.Created.UTC().Truncate(time.Second)
	if opts.Created.IsZero() {
		opts.Created = time.Unix(0, 0).UTC()
	}
	return opts, nil
}

func (opts Options) workingDir() string {
	if opts.Base == BaseDistrolessNonroot {
		return nonrootHome
	}
	return ""
}

func (opts Options) baseEnv() []string {
	if opts.Base == BaseDistrolessNonroot {
		return []string{envPath, envSSLCert}
	}
	return []string{envPath}
}
