// SPDX-License-Identifier: MIT

// inlined (Go) — hot code the compiler inlines two deep: main.spin (kept
// a function of its own) loops over main.outer, and main.outer calls
// main.inner twice; both are small enough that Go inlines them, so their
// instructions are all inside main.spin and only the binary's inline tree
// says which call they belong to. A profile that reads that tree shows
// main.inner under main.outer under main.spin. It measures nothing itself.
//
// Usage: inlined-go SECONDS READY_FILE GO_FILE
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

var sink uint64

func inner(x uint64) uint64 {
	x = (x ^ x>>31) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x = (x ^ x>>29) * 0xbf58476d1ce4e5b9
	return (x ^ x>>31) + 0x9e3779b97f4a7c15
}

func outer(x uint64) uint64 { return inner(x) ^ (x >> 17) }

//go:noinline
func spin(n int) {
	x := sink
	for i := 0; i < n; i++ {
		x = outer(x)
	}
	sink = x
}

func main() {
	seconds, _ := strconv.ParseFloat(os.Args[1], 64)
	fmt.Println(os.Getpid())
	os.WriteFile(os.Args[2], nil, 0o644)
	for {
		if _, err := os.Stat(os.Args[3]); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for time.Now().Before(end) {
		spin(100000)
	}
	fmt.Println("done")
}
