// Package ociimage builds a container image of one static Linux binary without Docker and
// writes it as a docker-archive tar (the format of `docker save`), which `docker load`, `kind
// load image-archive` and `ctr -n k8s.io images import` accept. `make image` builds the hub's
// image with it (see hack/image); the offline kind node image packs its images with it
// (hack/offline/nodeimage). It exists because this machine reaches no registry: with one, the
// Dockerfile (`make docker-build`) builds the same image from gcr.io/distroless/static:nonroot.
//
// The image has the layout of the Dockerfile's: a base layer, then a layer with the binary. With
// BaseDistrolessNonroot the base layer holds the files of gcr.io/distroless/static:nonroot that
// a static Go binary uses (/etc/passwd, /etc/group, /etc/nsswitch.conf, the CA certificates,
// /home/nonroot, /root, /tmp) and nothing else: no shell, no package manager. With BaseScratch
// there is no base layer, as with FROM scratch.
//
// Builds are reproducible: every file's time and the image's creation time are
// Options.Created, owners and modes are fixed, so the same inputs give the same image digest
// and the same tar, byte for byte (with the same Go version, whose gzip compresses the layers).
package ociimage
