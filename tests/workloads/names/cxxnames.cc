// SPDX-License-Identifier: MIT
//
// A C++ program whose time is in a member function of a class template in
// a namespace, for the demangling test (tests/integration/test-demangle.sh):
// demo::Worker<int>::spin(int) burns CPU for the seconds given (default 2).
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace demo {
template <typename T> struct Worker {
        T state;
        __attribute__((noinline)) T spin(int n)
        {
                for (int i = 0; i < n; i++)
                        state = state * 1103515245 + 12345 + i;
                return state;
        }
};
} // namespace demo

int main(int argc, char **argv)
{
        double secs = argc > 1 ? std::atof(argv[1]) : 2.0;
        demo::Worker<int> w{1};
        auto t0 = std::chrono::steady_clock::now();
        long sum = 0;
        while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < secs)
                sum += w.spin(1000000);
        std::printf("%ld\n", sum);
        return 0;
}
