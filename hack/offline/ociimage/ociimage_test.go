package ociimage_test

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"configbundle.dev/hub/hack/offline/ociimage"
)

const (
	pathEnv    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	sslCertEnv = "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"
	fakeCA     = "-----BEGIN CERTIFICATE-----\nnot a real certificate\n-----END CERTIFICATE-----\n"
)

// created is the Created of the tests; every file of the layers must have it.
var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// tarEntry is what a test checks of a layer's tar entry.
type tarEntry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
}

func dirEntry(name string, mode int64, id int) tarEntry {
	return tarEntry{Name: name, Type: tar.TypeDir, Mode: mode, UID: id, GID: id, ModTime: created}
}

func fileEntry(name string, mode int64) tarEntry {
	return tarEntry{Name: name, Type: tar.TypeReg, Mode: mode, ModTime: created}
}

// distrolessLayer is the base layer of ociimage.BaseDistrolessNonroot.
var distrolessLayer = []tarEntry{
	dirEntry("etc/", 0o755, 0),
	fileEntry("etc/group", 0o644),
	fileEntry("etc/nsswitch.conf", 0o644),
	fileEntry("etc/passwd", 0o644),
	dirEntry("etc/ssl/", 0o755, 0),
	dirEntry("etc/ssl/certs/", 0o755, 0),
	fileEntry("etc/ssl/certs/ca-certificates.crt", 0o644),
	dirEntry("home/", 0o755, 0),
	dirEntry("home/nonroot/", 0o700, 65532),
	dirEntry("root/", 0o700, 0),
	dirEntry("tmp/", 0o1777, 0),
}

func TestWrite(t *testing.T) {
	bin := staticBinary(t)
	ca := writeFile(t, "ca.crt", fakeCA)
	for _, tc := range []struct {
		name       string
		opts       ociimage.Options
		wantRef    string
		wantLayers [][]tarEntry
		wantConfig v1.Config
		wantFiles  map[string]string // path in the image: contents
		wantLines  map[string]string // path in the image: a line of it
	}{{
		name: "the hub on distroless static:nonroot, by default",
		opts: ociimage.Options{
			Labels: map[string]string{"org.opencontainers.image.version": "v1.2.3"},
		},
		wantRef:    "ghcr.io/configbundle/hub:dev",
		wantLayers: [][]tarEntry{distrolessLayer, {fileEntry("hub", 0o755)}},
		wantConfig: v1.Config{
			User:       "65532:65532",
			Entrypoint: []string{"/hub"},
			WorkingDir: "/home/nonroot",
			Env:        []string{pathEnv, sslCertEnv},
			Labels:     map[string]string{"org.opencontainers.image.version": "v1.2.3"},
		},
		wantFiles: map[string]string{
			"/etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
			"/etc/group":                         "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n",
			"/etc/ssl/certs/ca-certificates.crt": fakeCA,
			"/hub":                               readFile(t, bin),
		},
		wantLines: map[string]string{"/etc/nsswitch.conf": "hosts:          files dns"},
	}, {
		name: "the pause image on scratch",
		opts: ociimage.Options{
			Ref: "registry.k8s.io/pause:test", Base: ociimage.BaseScratch,
			BinaryPath: "/pause", User: "65535:65535",
			CACertificates: "/nonexistent", // ignored on scratch
		},
		wantRef:    "registry.k8s.io/pause:test",
		wantLayers: [][]tarEntry{{fileEntry("pause", 0o755)}},
		wantConfig: v1.Config{User: "65535:65535", Entrypoint: []string{"/pause"}, Env: []string{pathEnv}},
		wantFiles:  map[string]string{"/pause": readFile(t, bin)},
	}, {
		name: "a nested binary path and more environment, untagged",
		opts: ociimage.Options{
			Ref: "example.test/tool", Base: ociimage.BaseScratch,
			BinaryPath: "/usr/local/bin/tool", Env: []string{"TOOL_MODE=test"},
		},
		wantRef: "example.test/tool:latest",
		wantLayers: [][]tarEntry{{
			dirEntry("usr/", 0o755, 0), dirEntry("usr/local/", 0o755, 0), dirEntry("usr/local/bin/", 0o755, 0),
			fileEntry("usr/local/bin/tool", 0o755),
		}},
		wantConfig: v1.Config{Entrypoint: []string{"/usr/local/bin/tool"}, Env: []string{pathEnv, "TOOL_MODE=test"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Binary, opts.Created = bin, created
			opts.CACertificates = cmpOr(opts.CACertificates, ca)
			out := filepath.Join(t.TempDir(), "new-dir", "image.tar")
			img, err := ociimage.Write(out, opts)
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("stat %s: %v, %v; want mode 0644", out, fi, err)
			}
			back := readImage(t, out, tc.wantRef)
			if want, got := digest(t, img), digest(t, back); got != want {
				t.Errorf("digest read back = %s, want %s as written", got, want)
			}
			cf, err := back.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Equal(created) {
				t.Errorf("platform %s/%s created %v, want linux/%s created %v", cf.OS, cf.Architecture, cf.Created, runtime.GOARCH, created)
			}
			if diff := cmp.Diff(tc.wantConfig, cf.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			layers, files := readLayers(t, back)
			if diff := cmp.Diff(tc.wantLayers, layers); diff != "" {
				t.Errorf("layers (-want +got):\n%s", diff)
			}
			for p, want := range tc.wantFiles {
				if got := files[p]; got != want && len(want) > 1000 {
					t.Errorf("%s differs: %d bytes, want %d", p, len(got), len(want))
				} else if got != want {
					t.Errorf("%s (-want +got):\n%s", p, cmp.Diff(want, got))
				}
			}
			for p, want := range tc.wantLines {
				if !slices.Contains(strings.Split(files[p], "\n"), want) {
					t.Errorf("%s has no line %q:\n%s", p, want, files[p])
				}
			}
			assertNoShell(t, layers)
		})
	}
}

func TestWriteIsReproducible(t *testing.T) {
	bin := staticBinary(t)
	// The same binary elsewhere, with another time: neither is part of the image.
	other := writeFile(t, "other-hub", readFile(t, bin))
	if err := os.Chmod(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(other, time.Now(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	ca := writeFile(t, "ca.crt", fakeCA)
	dir := t.TempDir()
	write := func(file, binary string, created time.Time) (v1.Hash, string) {
		img, err := ociimage.Write(filepath.Join(dir, file), ociimage.Options{Binary: binary, CACertificates: ca, Created: created})
		if err != nil {
			t.Fatal(err)
		}
		return digest(t, img), readFile(t, filepath.Join(dir, file))
	}
	d1, tar1 := write("1.tar", bin, created)
	d2, tar2 := write("2.tar", other, created.Add(time.Millisecond)) // whole seconds count
	if d1 != d2 || tar1 != tar2 {
		t.Errorf("the same inputs gave digests %s and %s, tars equal: %t", d1, d2, tar1 == tar2)
	}
	if d3, _ := write("3.tar", bin, created.Add(time.Second)); d3 == d1 {
		t.Errorf("another creation time gave the same digest %s", d3)
	}
	// The zero Created is the Unix epoch.
	img, err := ociimage.Build(ociimage.Options{Binary: bin, CACertificates: ca})
	if err != nil {
		t.Fatal(err)
	}
	if cf, err := img.ConfigFile(); err != nil || !cf.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("created = %v, %v; want the Unix epoch", cf.Created, err)
	}
}

func TestWriteArchIsTheBinarys(t *testing.T) {
	for _, tc := range []struct {
		machine elf.Machine
		order   binary.ByteOrder
		want    string
	}{
		{elf.EM_X86_64, binary.LittleEndian, "amd64"},
		{elf.EM_AARCH64, binary.LittleEndian, "arm64"},
		{elf.EM_PPC64, binary.LittleEndian, "ppc64le"},
		{elf.EM_S390, binary.BigEndian, "s390x"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			bin := fakeELF(t, tc.machine, tc.order, false)
			img, err := ociimage.Build(ociimage.Options{Binary: bin, Base: ociimage.BaseScratch})
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Architecture != tc.want {
				t.Errorf("architecture = %q, want %q", cf.Architecture, tc.want)
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	bin := staticBinary(t)
	ca := writeFile(t, "ca.crt", fakeCA)
	for _, tc := range []struct {
		name     string
		opts     ociimage.Options
		want     string // in the message
		notExist bool   // errors.Is(err, fs.ErrNotExist)
	}{
		{name: "no binary", opts: ociimage.Options{CACertificates: ca}, want: "no binary: set Options.Binary"},
		{name: "missing binary", opts: ociimage.Options{Binary: "/nonexistent/hub", CACertificates: ca}, want: "binary /nonexistent/hub", notExist: true},
		{name: "missing CA certificates", opts: ociimage.Options{Binary: bin, CACertificates: "/nonexistent/ca.crt"}, want: "read CA certificates", notExist: true},
		{name: "not an executable", opts: ociimage.Options{Binary: ca, CACertificates: ca}, want: "want a static Linux executable"},
		{name: "dynamically linked", opts: ociimage.Options{Binary: fakeELF(t, elf.EM_X86_64, binary.LittleEndian, true)}, want: "is dynamically linked"},
		{name: "another architecture", opts: ociimage.Options{Binary: fakeELF(t, elf.EM_AARCH64, binary.LittleEndian, false), Arch: "amd64"}, want: "is built for arm64, not for the requested architecture amd64"},
		{name: "bad reference", opts: ociimage.Options{Ref: "Bad Ref:x", Binary: bin, CACertificates: ca}, want: `image reference "Bad Ref:x"`},
		{name: "relative binary path", opts: ociimage.Options{Binary: bin, BinaryPath: "hub", CACertificates: ca}, want: "want a clean absolute file path"},
		{name: "unknown base", opts: ociimage.Options{Binary: bin, Base: "alpine"}, want: `unknown base "alpine"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "image.tar")
			_, err := ociimage.Write(out, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one saying %q", err, tc.want)
			}
			if tc.notExist && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %v does not wrap fs.ErrNotExist", err)
			}
			if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a failed Write left %s behind (stat: %v)", out, err)
			}
		})
	}
}

// staticBinary builds a tiny static Go program for linux and this machine's architecture.
func staticBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFileIn(t, dir, "go.mod", "module hello\n")
	writeFileIn(t, dir, "main.go", "package main\n\nfunc main() { println(\"hello\") }\n")
	cmd := exec.Command("go", "build", "-trimpath", "-o", "hello", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "hello")
}

// fakeELF writes the ELF header of an executable for machine, with a program interpreter if
// interp: enough for an image, not to run.
func fakeELF(t *testing.T, machine elf.Machine, order binary.ByteOrder, interp bool) string {
	t.Helper()
	data := byte(elf.ELFDATA2LSB)
	if order == binary.BigEndian {
		data = byte(elf.ELFDATA2MSB)
	}
	hdr := elf.Header64{
		Ident:     [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), data, byte(elf.EV_CURRENT)},
		Type:      uint16(elf.ET_EXEC),
		Machine:   uint16(machine),
		Version:   uint32(elf.EV_CURRENT),
		Ehsize:    uint16(binary.Size(elf.Header64{})),
		Phentsize: uint16(binary.Size(elf.Prog64{})),
	}
	var progs []elf.Prog64
	if interp {
		hdr.Phoff, hdr.Phnum = uint64(hdr.Ehsize), 1
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP)})
	}
	var buf bytes.Buffer
	if err := binary.Write(&buf, order, hdr); err != nil {
		t.Fatal(err)
	}
	if err := binary.Write(&buf, order, progs); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "fake-elf", buf.String())
}

// readImage reads back the image that the tar at file names ref, checking that it is the
// only one in the tar.
func readImage(t *testing.T, file, ref string) v1.Image {
	t.Helper()
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !cmp.Equal(m[0].RepoTags, []string{ref}) {
		t.Fatalf("manifest.json = %+v, want one image tagged %s", m, ref)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// readLayers returns the entries of each layer of img, and the contents of its files by path.
func readLayers(t *testing.T, img v1.Image) ([][]tarEntry, map[string]string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var entries [][]tarEntry
	files := map[string]string{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		var layer []tarEntry
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			layer = append(layer, tarEntry{hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime.UTC()})
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files["/"+hdr.Name] = string(data)
		}
		rc.Close()
		entries = append(entries, layer)
	}
	return entries, files
}

// assertNoShell fails if any layer has a shell, busybox or anything in a bin directory.
func assertNoShell(t *testing.T, layers [][]tarEntry) {
	t.Helper()
	for _, layer := range layers {
		for _, e := range layer {
			p := "/" + strings.TrimSuffix(e.Name, "/")
			switch path.Base(p) {
			case "sh", "bash", "ash", "dash", "busybox", "apt", "apt-get", "dpkg":
				t.Errorf("the image has %s", p)
			}
			if strings.HasPrefix(p, "/bin") || strings.HasPrefix(p, "/sbin") || strings.HasPrefix(p, "/usr/bin") {
				t.Errorf("the image has %s", p)
			}
		}
	}
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func writeFile(t *testing.T, name, contents string) string {
	t.Helper()
	return writeFileIn(t, t.TempDir(), name, contents)
}

func writeFileIn(t *testing.T, dir, name, contents string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
