// SPDX-License-Identifier: MIT
//
// A Java program that measures where its CPU time goes, for test-java:
// its main thread runs, in turn, alpha() (work(400000)), beta()
// (work(200000)), callerOne() calling shared() once and callerTwo()
// calling it three times (work(50000) each). Each adds its own inclusive
// CPU time (the thread's CPU clock) and shared() its time per caller; at
// the end it writes OUT, JSON: {"tid": N, "cpu_ns": N, "iterations": N,
// "functions": {name: ns}, "callers": {name: ns}}. It prints its pid, waits for GO
// (when given; "-": none), runs SECONDS, and then writes OUT. With LATE,
// gamma() (work(300000)) joins the loop LATE seconds into the run: a method
// first called, and so compiled, long after the others.
//
//   java [-XX:+PreserveFramePointer] Shares OUT SECONDS [GO [LATE]]
import java.io.FileWriter;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.Map;

public class Shares {
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();
    static final Map<String, Long> FUNCTIONS = new LinkedHashMap<>();
    static final Map<String, Long> CALLERS = new LinkedHashMap<>();
    static volatile long sink;

    static long clock() {
        return MX.getCurrentThreadCpuTime();
    }

    static void account(Map<String, Long> m, String name, long ns) {
        m.merge(name, ns, Long::sum);
    }

    static long work(int n) {
        long s = 0;
        for (int i = 0; i < n; i++)
            s += ((long) i * i) ^ (s >>> 3);
        return s;
    }

    static void alpha() {
        long t = clock();
        sink += work(400000);
        account(FUNCTIONS, "alpha", clock() - t);
    }

    static void beta() {
        long t = clock();
        sink += work(200000);
        account(FUNCTIONS, "beta", clock() - t);
    }

    static void gamma() {
        long t = clock();
        sink += work(300000);
        account(FUNCTIONS, "gamma", clock() - t);
    }

    static void shared(String caller) {
        long t = clock();
        sink += work(50000);
        long d = clock() - t;
        account(FUNCTIONS, "shared", d);
        account(CALLERS, caller, d);
    }

    static void callerOne() {
        shared("callerOne");
    }

    static void callerTwo() {
        for (int i = 0; i < 3; i++)
            shared("callerTwo");
    }

    public static void main(String[] args) throws Exception {
        String out = args[0];
        double seconds = Double.parseDouble(args[1]);
        String go = args.length > 2 && !args[2].equals("-") ? args[2] : null;
        double late = args.length > 3 ? Double.parseDouble(args[3]) : -1;
        System.out.println(ProcessHandle.current().pid());
        System.out.flush();
        while (go != null && !Files.exists(Paths.get(go)))
            Thread.sleep(1);
        long begin = System.nanoTime(), end = begin + (long) (seconds * 1e9);
        long gammaFrom = late < 0 ? Long.MAX_VALUE : begin + (long) (late * 1e9);
        long start = clock(), iterations = 0;
        while (System.nanoTime() < end) {
            alpha();
            beta();
            callerOne();
            callerTwo();
            if (System.nanoTime() >= gammaFrom)
                gamma();
            iterations++;
        }
        long cpu = clock() - start;
        long tid = Long.parseLong(Files.readSymbolicLink(Paths.get("/proc/thread-self")).getFileName().toString());
        StringBuilder b = new StringBuilder();
        b.append("{\"tid\": ").append(tid).append(", \"cpu_ns\": ").append(cpu);
        b.append(", \"iterations\": ").append(iterations).append(", \"functions\": {");
        String sep = "";
        for (Map.Entry<String, Long> e : FUNCTIONS.entrySet()) {
            b.append(sep).append('"').append(e.getKey()).append("\": ").append(e.getValue());
            sep = ", ";
        }
        b.append("}, \"callers\": {");
        sep = "";
        for (Map.Entry<String, Long> e : CALLERS.entrySet()) {
            b.append(sep).append('"').append(e.getKey()).append("\": ").append(e.getValue());
            sep = ", ";
        }
        b.append("}}\n");
        try (FileWriter w = new FileWriter(out + ".tmp")) {
            w.write(b.toString());
        }
        Files.move(Paths.get(out + ".tmp"), Paths.get(out));
    }
}
