// SPDX-License-Identifier: MIT

// leafcall (Go) — one hot leaf called from ten callers with known shares:
// caller k calls leaf with k units of work, so caller k's share of the
// leaf's time is k/55. Go compiles small leaves without a stack frame, the
// case where a frame-pointer unwinder loses the caller. It measures
// nothing itself: the shares are fixed by construction (each caller does
// nothing but call the leaf).
//
// Usage: leafcall-go SECONDS READY_FILE GO_FILE
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

const unit = 20000

var sink uint64

//go:noinline
func leaf(n int, x uint64) uint64 {
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func caller01() { sink += leaf(1*unit, sink) }

//go:noinline
func caller02() { sink += leaf(2*unit, sink) }

//go:noinline
func caller03() { sink += leaf(3*unit, sink) }

//go:noinline
func caller04() { sink += leaf(4*unit, sink) }

//go:noinline
func caller05() { sink += leaf(5*unit, sink) }

//go:noinline
func caller06() { sink += leaf(6*unit, sink) }

//go:noinline
func caller07() { sink += leaf(7*unit, sink) }

//go:noinline
func caller08() { sink += leaf(8*unit, sink) }

//go:noinline
func caller09() { sink += leaf(9*unit, sink) }

//go:noinline
func caller10() { sink += leaf(10*unit, sink) }

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
		caller01()
		caller02()
		caller03()
		caller04()
		caller05()
		caller06()
		caller07()
		caller08()
		caller09()
		caller10()
	}
	fmt.Println("done")
}
