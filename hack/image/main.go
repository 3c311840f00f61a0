// Command image builds the hub's container image without Docker (see package ociimage) and
// writes it as a docker-archive tar, which `ctr -n k8s.io images import`, `kind load
// image-archive` and `docker load` accept. Use `make image IMG=...`; alone:
//
//	go run ./hack/image --image ghcr.io/configbundle/hub:dev --output bin/hub-image.tar
//
// It builds the hub as the Dockerfile does (CGO_ENABLED=0, -trimpath, -s -w, the version and
// git commit set with -X), unless --binary gives a built one, and puts it on the distroless
// static:nonroot files. The image's files and creation time have the time SOURCE_DATE_EPOCH
// (seconds since the Unix epoch) if it is set, else the epoch itself, so the same binary gives
// the same digest.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"configbundle.dev/hub/hack/offline/ociimage"
)

// hubPackage is the hub's main package, which the Dockerfile builds.
const hubPackage = "configbundle.dev/hub/hub"

type options struct {
	image, output, binary       string
	pkg, entrypoint             string
	version, gitCommit, arch    string
	caCertificates, sourceLabel string
}

func main() {
	var o options
	flag.StringVar(&o.image, "image", ociimage.DefaultRef, "The image's name:tag in the tar.")
	flag.StringVar(&o.output, "output", "bin/hub-image.tar", "The tar to write.")
	flag.StringVar(&o.binary, "binary", "", "A static hub binary to use instead of building one.")
	flag.StringVar(&o.pkg, "package", hubPackage, "The main package to build into the image (the kind test's application: ./test/kind/testapp).")
	flag.StringVar(&o.entrypoint, "entrypoint", ociimage.DefaultBinaryPath, "The binary's path in the image, its entrypoint.")
	flag.StringVar(&o.version, "version", "", "The version built into the hub and labelled (default: as the Makefile's VERSION: git describe --tags --always --dirty, else devel).")
	flag.StringVar(&o.gitCommit, "git-commit", "", "The git commit built into the hub and labelled (default: as the Makefile's GIT_COMMIT: git rev-parse HEAD).")
	flag.StringVar(&o.arch, "arch", "", "The GOARCH to build the hub for (default: this machine's, "+runtime.GOARCH+"); with --binary, the binary's, which a given one must match.")
	flag.StringVar(&o.caCertificates, "ca-certificates", ociimage.DefaultCACertificates, "The CA certificates (PEM bundle) to copy into the image.")
	flag.StringVar(&o.sourceLabel, "source", "https://github.com/configbundle/hub", "The org.opencontainers.image.source label.")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	o.version = cmp.Or(o.version, git("describe", "--tags", "--always", "--dirty"), "devel")
	o.gitCommit = cmp.Or(o.gitCommit, git("rev-parse", "HEAD"))
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	if o.binary == "" {
		dir, err := os.MkdirTemp("", "hub-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.binary = filepath.Join(dir, "hub")
		o.arch = cmp.Or(o.arch, runtime.GOARCH)
		if err := buildHub(o); err != nil {
			return err
		}
	}
	img, err := ociimage.Write(o.output, ociimage.Options{
		Ref:            o.image,
		Binary:         o.binary,
		BinaryPath:     o.entrypoint,
		Arch:           o.arch,
		CACertificates: o.caCertificates,
		Created:        created,
		Labels:         labels(o),
	})
	if err != nil {
		return err
	}
	return report(o, img)
}

// report prints the image's name, platform, digest, id and size.
func report(o options, img v1.Image) error {
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	fi, err := os.Stat(o.output)
	if err != nil {
		return err
	}
	// An import into containerd keeps the id but writes a manifest, with a digest, of its own.
	fmt.Printf("image   %s (%s/%s, version %s)\n", o.image, cf.OS, cf.Architecture, o.version)
	fmt.Printf("digest  %s (of the manifest, as a registry would have it)\n", digest)
	fmt.Printf("id      %s (of the config: the IMAGE ID of crictl and docker images)\n", id)
	fmt.Printf("size    %.1f MB (%d bytes) in %s\n", float64(fi.Size())/1e6, fi.Size(), o.output)
	return nil
}

// labels returns the image's OCI labels, leaving out those with no value.
func labels(o options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.source":   o.sourceLabel,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.gitCommit,
	}
	for k, v := range l {
		if v == "" {
			delete(l, k)
		}
	}
	return l
}

// buildHub builds o.pkg (the hub, by default) into o.binary as the Dockerfile does the hub.
func buildHub(o options) error {
	ldflags := "-s -w -X configbundle.dev/hub/pkg/version.Version=" + o.version +
		" -X configbundle.dev/hub/pkg/version.GitCommit=" + o.gitCommit
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", o.binary, o.pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", o.pkg, err)
	}
	return nil
}

// git returns the output of git args, or "" if git fails (not a checkout, no git).
func git(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// sourceDateEpoch returns the time of SOURCE_DATE_EPOCH, or the zero time (for ociimage, the
// Unix epoch) if it is not set.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Time{}, nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since the Unix epoch: %w", s, err)
	}
	return time.Unix(sec, 0), nil
}
