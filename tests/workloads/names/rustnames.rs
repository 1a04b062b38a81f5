// SPDX-License-Identifier: MIT
//
// A Rust program whose time is in work::spin, for the demangling test
// (tests/integration/test-demangle.sh), built with the legacy and the v0
// symbol mangling. Runs for the seconds given (default 2).
mod work {
    #[inline(never)]
    pub fn spin(n: u64) -> u64 {
        let mut x = n;
        for i in 0..n {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        x
    }
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let t = std::time::Instant::now();
    let mut s = 0u64;
    while t.elapsed().as_secs_f64() < secs {
        s = s.wrapping_add(work::spin(1000000));
    }
    println!("{}", s);
}
