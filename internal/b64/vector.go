//go:build (amd64 || arm64) && !purego

package b64

import (
	"runtime"

	"golang.org/x/sys/cpu"
)

// vector reports whether asm's codec runs vector code here (AVX2 on
// amd64; NEON, always there, on arm64); without it, asm falls back to the
// standard library, slower than the portable code.
var vector = runtime.GOARCH == "arm64" || cpu.X86.HasAVX2
