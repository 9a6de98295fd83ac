//go:build !((amd64 || arm64) && !purego)

package b64

// vector is false: asm's codec is the standard library's here.
const vector = false
