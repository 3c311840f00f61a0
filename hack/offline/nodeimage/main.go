// Command nodeimage packs the container images that a kind node of hack/kind preloads (the
// control plane kubeadm runs as static pods, kube-proxy, CoreDNS, etcd and pause) from static
// binaries built from the Go module proxy and C source, without Docker or a registry, into one
// docker-archive tar that the node's containerd imports as it boots (ctr images import).
//
// Every image but kube-proxy is its binary alone on scratch, as hack/offline/ociimage packs it;
// kube-proxy also carries the iptables userland (iptables-nft, its libraries and extensions),
// given as a directory tree with --kube-proxy-extra. The images run as root, as kubeadm's
// manifests expect of them (pause as 65535, as upstream's).
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"configbundle.dev/hub/hack/offline/ociimage"
)

// spec is one image: its name, its binary and where the binary goes, its user, and a directory
// tree to add.
type spec struct {
	ref, binary, path, user string
	extra                   string
}

func main() {
	var (
		out         = flag.String("out", "", "the docker-archive tar to write")
		registry    = flag.String("registry", "registry.k8s.io", "registry of the image names, as kubeadm names them")
		kubeVersion = flag.String("kube-version", "", "tag of the control-plane and kube-proxy images, such as v1.36.3")
		kubeDir     = flag.String("kube-dir", "", "directory of kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy")
		etcd        = flag.String("etcd", "", "etcd binary")
		etcdTag     = flag.String("etcd-tag", "", "tag of the etcd image, as kubeadm names it (such as 3.6.8-0)")
		coredns     = flag.String("coredns", "", "coredns binary")
		corednsTag  = flag.String("coredns-tag", "", "tag of the coredns image (such as v1.14.2)")
		pause       = flag.String("pause", "", "pause binary (static)")
		pauseTag    = flag.String("pause-tag", "", "tag of the pause image (such as 3.10.2)")
		proxyExtra  = flag.String("kube-proxy-extra", "", "directory tree added to the kube-proxy image (the iptables userland)")
	)
	flag.Parse()
	for n, v := range map[string]string{"out": *out, "kube-version": *kubeVersion, "kube-dir": *kubeDir, "etcd": *etcd,
		"etcd-tag": *etcdTag, "coredns": *coredns, "coredns-tag": *corednsTag, "pause": *pause, "pause-tag": *pauseTag,
		"kube-proxy-extra": *proxyExtra} {
		if v == "" {
			log.Fatalf("--%s is required", n)
		}
	}

	specs := []spec{
		{ref: *registry + "/etcd:" + *etcdTag, binary: *etcd, path: "/usr/local/bin/etcd"},
		{ref: *registry + "/coredns/coredns:" + *corednsTag, binary: *coredns, path: "/coredns"},
		{ref: *registry + "/pause:" + *pauseTag, binary: *pause, path: "/pause", user: "65535:65535"},
	}
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		s := spec{ref: *registry + "/" + b + ":" + *kubeVersion, binary: filepath.Join(*kubeDir, b), path: "/usr/local/bin/" + b}
		if b == "kube-proxy" {
			s.extra = *proxyExtra
		}
		specs = append(specs, s)
	}
	if err := write(*out, specs); err != nil {
		log.Fatal(err)
	}
	for _, s := range specs {
		fmt.Println(s.ref)
	}
}

// write builds the images of specs and writes them into one docker-archive tar, out.
func write(out string, specs []spec) error {
	created := time.Unix(0, 0).UTC()
	images := map[name.Reference]v1.Image{}
	for _, s := range specs {
		tag, err := name.NewTag(s.ref)
		if err != nil {
			return fmt.Errorf("image name %q: %w", s.ref, err)
		}
		img, err := ociimage.Build(ociimage.Options{Ref: s.ref, Binary: s.binary, BinaryPath: s.path,
			Base: ociimage.BaseScratch, User: s.user, Created: created})
		if err != nil {
			return fmt.Errorf("%s: %w", s.ref, err)
		}
		if s.extra != "" {
			l, err := treeLayer(s.extra, created)
			if err != nil {
				return fmt.Errorf("%s: %w", s.ref, err)
			}
			if img, err = mutate.AppendLayers(img, l); err != nil {
				return fmt.Errorf("%s: %w", s.ref, err)
			}
		}
		images[tag] = img
	}
	tmp := out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, images); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

// treeLayer is an uncompressed-source layer of the directory tree root (regular files,
// directories and symbolic links), owned by root, every file with time mtime.
func treeLayer(root string, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(info.Mode().Perm()), ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case d.Type().IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		default:
			return fmt.Errorf("%s: not a file, directory or symbolic link", p)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", root, err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	if !strings.HasSuffix(root, "/") && len(data) == 0 {
		return nil, fmt.Errorf("layer of %s: empty", root)
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressedCaching)
}
