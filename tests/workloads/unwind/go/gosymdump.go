// SPDX-License-Identifier: MIT

// gosymdump prints the functions of a Go binary's .gopclntab as Go's own
// reader (debug/gosym) sees them, one "ENTRY NAME" line each (ENTRY in
// hex): the peer of the agent's reader in tests/unit/test-gopclntab.c.
//
// Usage: go run gosymdump.go BINARY
package main

import (
	"debug/elf"
	"debug/gosym"
	"fmt"
	"os"
)

func main() {
	f, err := elf.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		fmt.Fprintln(os.Stderr, "no .gopclntab or .text")
		os.Exit(1)
	}
	data, err := pcln.Data()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	table, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, fn := range table.Funcs {
		fmt.Printf("%x %s\n", fn.Entry, fn.Name)
	}
}
