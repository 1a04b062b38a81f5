// SPDX-License-Identifier: MIT
//
// A C++ program whose time is in a member function of a class template in
// a namespace, for the demangling test (tests/integration/test-demangle.sh):
// demo::Worker<int>::spin(int) burns CPU for the seconds given (default 2).
// With a second argument, "overloads", the time goes to two overloads
// instead, demo::mix(int) twice as much as demo::mix(double).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

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

__attribute__((noinline)) long mix(int n)
{
        long s = 0;
        for (int i = 0; i < n; i++)
                s = s * 31 + i;
        return s;
}

__attribute__((noinline)) double mix(double x)
{
        for (int i = 0; i < 1000000; i++)
                x = x * 0.999999 + 1.0;
        return x;
}
} // namespace demo

int main(int argc, char **argv)
{
        double secs = argc > 1 ? std::atof(argv[1]) : 2.0;
        demo::Worker<int> w{1};
        auto t0 = std::chrono::steady_clock::now();
        long sum = 0;
        bool overloads = argc > 2 && std::string(argv[2]) == "overloads";
        while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < secs)
                sum += overloads ? demo::mix(2000000) + (long)demo::mix(1.0) : w.spin(1000000);
        std::printf("%ld\n", sum);
        return 0;
}
