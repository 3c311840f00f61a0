package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"

	"configbundle.dev/hub/internal/ociimage"
)

// pauseSource is Kubernetes' pause program, in the module the binaries are built from.
const pauseSource = "k8s.io/kubernetes@v1.36.3"

// buildPauseImage compiles Kubernetes' pause.c statically (no registry is reachable to pull
// the pause image from) and writes it as the image PauseImage into dir; it returns the tar.
func buildPauseImage(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", pauseSource).Output()
	if err != nil {
		return "", fmt.Errorf("downloading %s for pause.c: %w", pauseSource, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("locating %s: %w", pauseSource, err)
	}
	bin := filepath.Join(dir, "pause")
	if out, err := exec.CommandContext(ctx, "gcc", "-Os", "-static", "-DVERSION=3.10-configbundle", "-o", bin,
		filepath.Join(mod.Dir, "build", "pause", "linux", "pause.c")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling pause.c: %w: %s", err, out)
	}
	tar := filepath.Join(dir, "pause.tar")
	if _, err := ociimage.Write(tar, ociimage.Options{Ref: PauseImage, Binary: bin, BinaryPath: "/pause",
		Base: ociimage.BaseScratch, User: "65535:65535"}); err != nil {
		return "", fmt.Errorf("writing the pause image: %w", err)
	}
	return tar, nil
}
