package ociimage

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// goarch names the GOARCH of the ELF machines of Kubernetes's architectures and a few more;
// ppc64 is ppc64le in little endian.
var goarch = map[elf.Machine]string{
	elf.EM_X86_64:    "amd64",
	elf.EM_386:       "386",
	elf.EM_AARCH64:   "arm64",
	elf.EM_ARM:       "arm",
	elf.EM_S390:      "s390x",
	elf.EM_RISCV:     "riscv64",
	elf.EM_LOONGARCH: "loong64",
	elf.EM_PPC64:     "ppc64",
}

// staticBinaryArch checks that the file at p is a static Linux executable, which runs on an
// image without a C library, and returns its architecture as GOARCH spells it.
func staticBinaryArch(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("binary %s: want a static Linux executable: %w", p, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("binary %s: ELF type %v is no executable", p, f.Type)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return "", fmt.Errorf("binary %s is dynamically linked (it has a program interpreter) and cannot run without a C library; build it static (for Go, with CGO_ENABLED=0)", p)
		}
	}
	arch, ok := goarch[f.Machine]
	if !ok {
		return "", fmt.Errorf("binary %s: unknown ELF machine %v", p, f.Machine)
	}
	if arch == "ppc64" && f.ByteOrder == binary.LittleEndian {
		arch = "ppc64le"
	}
	return arch, nil
}
