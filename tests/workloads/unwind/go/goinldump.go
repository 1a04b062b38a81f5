// SPDX-License-Identifier: MIT

// goinldump prints the inlined calls of a Go binary as its DWARF records
// them (DW_TAG_inlined_subroutine, read with Go's debug/dwarf): the peer
// of the agent's reader of .gopclntab's inline trees in
// tests/unit/test-gopclntab.c, which reads a stripped copy of the binary.
// Each line is "START END CALLEE;...;CALLER" (START and END in hex, END
// exclusive, the innermost callee first, the function they were inlined
// into not among them): every pc in [START, END) runs that chain and no
// deeper one.
//
// Usage: go run goinldump.go BINARY
package main

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"os"
	"sort"
	"strings"
)

type inl struct {
	ranges [][2]uint64
	chain  []string // innermost first
}

func die(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// name is the DW_AT_name of an inlined call's abstract origin.
func name(d *dwarf.Data, e *dwarf.Entry) string {
	off, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
	if !ok {
		return ""
	}
	r := d.Reader()
	r.Seek(off)
	o, err := r.Next()
	if err != nil || o == nil {
		return ""
	}
	s, _ := o.Val(dwarf.AttrName).(string)
	return s
}

// flush prints the elementary intervals of one function's inlined calls.
func flush(calls []inl) {
	var cuts []uint64
	for _, c := range calls {
		for _, r := range c.ranges {
			cuts = append(cuts, r[0], r[1])
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
	for i := 0; i+1 < len(cuts); i++ {
		lo, hi := cuts[i], cuts[i+1]
		if lo == hi {
			continue
		}
		var best []string
		for _, c := range calls {
			for _, r := range c.ranges {
				if r[0] <= lo && hi <= r[1] && len(c.chain) > len(best) {
					best = c.chain
				}
			}
		}
		if best != nil {
			fmt.Printf("%x %x %s\n", lo, hi, strings.Join(best, ";"))
		}
	}
}

func main() {
	f, err := elf.Open(os.Args[1])
	if err != nil {
		die(err)
	}
	d, err := f.DWARF()
	if err != nil {
		die(err)
	}
	r := d.Reader()
	var calls []inl
	var stack [][]string // the chain at each open level; nil outside inlined calls
	for {
		e, err := r.Next()
		if err != nil {
			die(err)
		}
		if e == nil {
			break
		}
		if e.Tag == 0 {
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		var outer []string
		if len(stack) > 0 {
			outer = stack[len(stack)-1]
		}
		var chain []string
		switch e.Tag {
		case dwarf.TagSubprogram:
			flush(calls)
			calls = nil
		case dwarf.TagInlinedSubroutine:
			chain = append([]string{name(d, e)}, outer...)
			rs, err := d.Ranges(e)
			if err == nil && len(rs) > 0 {
				calls = append(calls, inl{rs, chain})
			}
		default:
			chain = outer
		}
		if e.Children {
			stack = append(stack, chain)
		}
	}
	flush(calls)
}
