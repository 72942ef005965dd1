//go:build !amd64 || purego

package crc32c

const foldBlock = 256

const canFold = false

func fold(crc uint32, p []byte) uint32 { panic("crc32c: no folding on this platform") }
