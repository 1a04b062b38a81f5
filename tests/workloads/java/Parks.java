// SPDX-License-Identifier: MIT
//
// A Java program whose main thread mostly waits, for test-java's off-CPU
// part: waiter() parks the thread for 2 ms (LockSupport.parkNanos) and
// then spins briefly, over and over, for SECONDS. Its off-CPU time is
// therefore almost all in waiter() under LockSupport.parkNanos. It prints
// its pid and its main thread's tid, and waits for GO (when given).
//
//   java [-XX:+PreserveFramePointer] Parks SECONDS [GO]
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.locks.LockSupport;

public class Parks {
    static volatile long sink;

    static void waiter() {
        LockSupport.parkNanos(2_000_000L);
        long s = 0;
        for (int i = 0; i < 20000; i++)
            s += ((long) i * i) ^ (s >>> 3);
        sink += s;
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        String go = args.length > 1 ? args[1] : null;
        System.out.println(ProcessHandle.current().pid());
        System.out.println(Files.readSymbolicLink(Paths.get("/proc/thread-self")).getFileName());
        System.out.flush();
        while (go != null && !Files.exists(Paths.get(go)))
            Thread.sleep(1);
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end)
            waiter();
    }
}
